package journal

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

var benchBody = func() []byte {
	b := make([]byte, 1024)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}()

var benchSHA = sha256.Sum256(benchBody)

func benchRecord(key string, body []byte, sha [32]byte) *Record {
	return &Record{
		Scope:    "acct_bench",
		Key:      key,
		Method:   http.MethodPost,
		URL:      "https://api.example.com/v1/orders",
		QueryURL: "https://api.example.com/v1/orders/by-key/" + key,
		Header:   http.Header{"Content-Type": {"application/json"}},
		Body:     body,
		BodySHA:  sha,
		State:    StatePending,
		Created:  t0,
		Updated:  t0,
		NextDue:  t0.Add(time.Minute),
	}
}

func settleRecord(r *Record) error {
	r.State = StateSucceeded
	r.Settled, r.Updated = t0.Add(time.Second), t0.Add(time.Second)
	r.Attempts = append(r.Attempts, Attempt{Number: 1, Kind: AttemptSubmit, Start: t0, Wrote: true, Done: true, Status: 201, Duration: time.Millisecond})
	r.Result = &Result{ResourceID: "ord_1", StatusCode: 201, Body: []byte(`{"id":"ord_1"}`)}
	return nil
}

// runWriters runs op for b.N records spread over writers goroutines and
// reports records/s and the median latency of one record (both writes).
func runWriters(b *testing.B, writers int, op func(key string) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, writers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t := time.Now()
				if err := op(fmt.Sprintf("key-%09d", i)); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	}
}

// BenchmarkCreateSettle journals a record with a 1 KiB body and settles
// it, from 1, 8 and 64 concurrent writers: through the Store, and through
// a baseline that does the same two writes (same encoding, same indexes)
// as one plain fsync'd bbolt Update each.
func BenchmarkCreateSettle(b *testing.B) {
	ctx := context.Background()
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d/baseline", writers), func(b *testing.B) {
			b.ReportAllocs()
			db := baselineDB(b)
			defer db.Close()
			runWriters(b, writers, func(key string) error { return baselineCreateSettle(db, key) })
		})
		b.Run(fmt.Sprintf("writers=%d/journal", writers), func(b *testing.B) {
			b.ReportAllocs()
			s, err := Open(filepath.Join(b.TempDir(), "journal.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			runWriters(b, writers, func(key string) error {
				if _, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA)); err != nil {
					return err
				}
				_, err := s.Update(ctx, "acct_bench", key, settleRecord)
				return err
			})
		})
	}
}

// BenchmarkCreateSettleNoSync is BenchmarkCreateSettle without fsync, so
// that the journal's CPU cost is what is measured: it reports the process's
// CPU time (user + system, all goroutines) per record.
func BenchmarkCreateSettleNoSync(b *testing.B) {
	ctx := context.Background()
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			b.ReportAllocs()
			s, err := Open(filepath.Join(b.TempDir(), "journal.db"), WithUnsafeNoSync())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cpu0 := cpuTime()
			runWriters(b, writers, func(key string) error {
				if _, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA)); err != nil {
					return err
				}
				_, err := s.Update(ctx, "acct_bench", key, settleRecord)
				return err
			})
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// baselineDB opens a fresh, fsync'd bbolt file with the journal's buckets.
func baselineDB(b *testing.B) *bolt.DB {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "base.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(db.Path())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if err := initMeta(db, f, false, openCommit{db: db, path: db.Path()}); err != nil {
		b.Fatal(err)
	}
	return db
}

// baselineCreateSettle does what Create and Update do, with the same
// encoding and indexes, as one plain bbolt Update per write.
func baselineCreateSettle(db *bolt.DB, key string) error {
	rec := benchRecord(key, benchBody, benchSHA)
	rk := recordKey(rec.Scope, rec.Key)
	enc := encode(nil, rec)
	err := db.Update(func(tx *bolt.Tx) error {
		if _, v, err := lookup(tx, rk); v != nil || err != nil {
			return cmp.Or(err, ErrExists)
		}
		return addRecord(tx, rk, rec, enc)
	})
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		sk, v, err := lookup(tx, rk)
		if err != nil {
			return err
		}
		r, err := decode(v)
		if err != nil {
			return err
		}
		was := *r
		_ = settleRecord(r)
		return (*getter)(nil).putRecord(tx, sk, rk, &was, r, encode(nil, r))
	})
}

// BenchmarkLoneWriterRatio alternates one record through the baseline and
// one through the Store, from a single goroutine, so that both latencies
// are measured under the same (noisy, shared) disk.
func BenchmarkLoneWriterRatio(b *testing.B) {
	ctx := context.Background()
	db := baselineDB(b)
	defer db.Close()
	s, err := Open(filepath.Join(b.TempDir(), "journal.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var base, journal []time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := fmt.Sprintf("key-%09d", i)
		i++
		start := time.Now()
		if err := baselineCreateSettle(db, key); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(start))
		start = time.Now()
		if _, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Update(ctx, "acct_bench", key, settleRecord); err != nil {
			b.Fatal(err)
		}
		journal = append(journal, time.Since(start))
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(median(base), "baseline-p50-µs")
	b.ReportMetric(median(journal), "journal-p50-µs")
	b.ReportMetric(median(journal)/median(base), "p50-ratio")
}

const benchOpen = 1000

// dueFixture returns a journal with the given number of settled records and
// benchOpen open ones, cached in the temporary directory because a million
// records take a while to write. Keys are random UUIDs, as the client
// makes them, so open records are scattered among settled ones.
func dueFixture(b *testing.B, settled int) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("idem-journal-bench-v%d-%ds-%do.db", formatVersion, settled, benchOpen))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	b.Logf("building %s (cached for later runs)", path)
	tmp := path + ".building"
	_ = os.Remove(tmp)
	s, err := Open(tmp, WithUnsafeNoSync())
	if err != nil {
		b.Fatal(err)
	}
	db := s.db
	src := rand.NewChaCha8([32]byte{1})
	rng := rand.New(src)
	body := benchBody[:200]
	sha := sha256.Sum256(body)
	type entry struct {
		key  string
		open bool
	}
	entries := make([]entry, 0, settled+benchOpen)
	for i := range settled + benchOpen {
		entries = append(entries, entry{uuid.Must(uuid.NewRandomFromReader(src)).String(), i < benchOpen})
	}
	// Sorted inserts build the file in minutes rather than hours; the
	// open records stay scattered across it.
	slices.SortFunc(entries, func(a, b entry) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	for chunk := range slices.Chunk(entries, 50000) {
		err := db.Update(func(tx *bolt.Tx) error {
			tx.Bucket(bucketKeys).FillPercent = 0.9
			for _, e := range chunk {
				r := benchRecord(e.key, body, sha)
				r.NextDue = t0.Add(time.Duration(rng.IntN(3600)) * time.Second)
				if !e.open {
					_ = settleRecord(r)
					r.Settled = t0.Add(-time.Duration(rng.IntN(30*24*3600)) * time.Second)
				}
				if err := addRecord(tx, recordKey(r.Scope, r.Key), r, encode(nil, r)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkDueScan times Due(now, 1000) and ForEachOpen over 1,000 open
// records in journals with 10,000 and 1,000,000 settled ones: the cost
// must not grow with the settled records.
func BenchmarkDueScan(b *testing.B) {
	ctx := context.Background()
	for _, settled := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("settled=%d", settled), func(b *testing.B) {
			if settled > 100_000 && testing.Short() {
				b.Skip("large fixture")
			}
			path := dueFixture(b, settled)
			s, err := Open(path, ReadOnly())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			by := t0.Add(2 * time.Hour)
			b.Run("Due", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					recs, err := s.Due(ctx, by, benchOpen)
					if err != nil || len(recs) != benchOpen {
						b.Fatalf("Due() = %d records, %v", len(recs), err)
					}
				}
			})
			b.Run("ForEachOpen", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					n := 0
					err := s.ForEachOpen(ctx, func(*Record) error { n++; return nil })
					if err != nil || n != benchOpen {
						b.Fatalf("ForEachOpen() visited %d, %v", n, err)
					}
				}
			})
		})
	}
}

// BenchmarkDueScanRatio alternates the scans of the two journals in one
// loop, so that both sides of the ratio see the same machine: on a shared,
// noisy machine, separate sub-benchmarks drift apart by more than the
// effect measured.
func BenchmarkDueScanRatio(b *testing.B) {
	if testing.Short() {
		b.Skip("large fixture")
	}
	ctx := context.Background()
	var stores [2]*Store
	for i, settled := range []int{10_000, 1_000_000} {
		s, err := Open(dueFixture(b, settled), ReadOnly())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	by := t0.Add(2 * time.Hour)
	var due, each [2][]time.Duration
	b.ReportAllocs()
	for b.Loop() {
		for i, s := range stores {
			start := time.Now()
			if recs, err := s.Due(ctx, by, benchOpen); err != nil || len(recs) != benchOpen {
				b.Fatalf("Due() = %d records, %v", len(recs), err)
			}
			due[i] = append(due[i], time.Since(start))
			start = time.Now()
			if err := s.ForEachOpen(ctx, func(*Record) error { return nil }); err != nil {
				b.Fatal(err)
			}
			each[i] = append(each[i], time.Since(start))
		}
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(median(due[0]), "Due-10k-µs")
	b.ReportMetric(median(due[1]), "Due-1M-µs")
	b.ReportMetric(median(due[1])/median(due[0]), "Due-ratio")
	b.ReportMetric(median(each[0]), "ForEachOpen-10k-µs")
	b.ReportMetric(median(each[1]), "ForEachOpen-1M-µs")
	b.ReportMetric(median(each[1])/median(each[0]), "ForEachOpen-ratio")
}
