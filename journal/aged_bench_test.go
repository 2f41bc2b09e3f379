package journal

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// agedRecords is how many operations the aged journal held and pruned.
const agedRecords = 1_000_000

// agedFixture returns the path of a journal that held agedRecords settled
// operations and then pruned every one of them: its pages are free pages,
// as in a service that has run for a while. It is built once (a minute or
// so) and cached in the temporary directory; callers copy it.
func agedFixture(b *testing.B) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("idem-journal-bench-aged-v%d-%d.db", formatVersion, agedRecords))
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
	for start := 0; start < agedRecords; start += 20000 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i := start; i < start+20000 && i < agedRecords; i++ {
				r := benchRecord(fmt.Sprintf("aged-%09d", i), benchBody, benchSHA)
				_ = settleRecord(r)
				// Sent and settled two days ago: Prune judges by the
				// latest of these times (Record.Prunable).
				ago := t0.Add(-48 * time.Hour)
				r.Created, r.Settled, r.Attempts[0].Start = ago, ago, ago
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
	n, err := s.Prune(context.Background(), t0.Add(-time.Hour))
	if err != nil || n != agedRecords {
		b.Fatalf("Prune() = %d, %v; want %d", n, err, agedRecords)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// copyTo copies the file at src to a new file in dir.
func copyTo(b *testing.B, dir, src string) string {
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return dst
}

// BenchmarkAgedRatio alternates one record (Create, then settle, then its
// copy from the log into the file) on a fresh journal and one on a copy of
// the aged one (1M operations held and pruned), from one goroutine, and reports the median time of each and
// their ratio: aged ÷ fresh throughput is the inverse of time-ratio. The
// sync=off variant isolates the commit's CPU and bytes written, which is
// where a large freelist costs.
func BenchmarkAgedRatio(b *testing.B) {
	aged := agedFixture(b)
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%t", sync), func(b *testing.B) {
			var opts []Option
			if !sync {
				opts = append(opts, WithUnsafeNoSync())
			}
			start := time.Now()
			agedS, err := Open(copyTo(b, b.TempDir(), aged), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer agedS.Close()
			b.Logf("aged copy opened in %v", time.Since(start))
			fresh, err := Open(filepath.Join(b.TempDir(), "fresh.db"), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer fresh.Close()
			ctx := context.Background()
			// A record's two writes, and its copy into the file: where a
			// large freelist costs, the applier's commit.
			one := func(s *Store, key string) time.Duration {
				start := time.Now()
				if _, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA)); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Update(ctx, "acct_bench", key, settleRecord); err != nil {
					b.Fatal(err)
				}
				if err := s.flush(); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			var tf, ta []time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("new-%09d", i)
				if i%2 == 0 {
					tf = append(tf, one(fresh, key))
					ta = append(ta, one(agedS, key))
				} else {
					ta = append(ta, one(agedS, key))
					tf = append(tf, one(fresh, key))
				}
				i++
			}
			median := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Nanoseconds()) / 1e3
			}
			mf, ma := median(tf), median(ta)
			b.ReportMetric(mf, "fresh-p50-µs")
			b.ReportMetric(ma, "aged-p50-µs")
			b.ReportMetric(mf/ma, "aged÷fresh-throughput")
		})
	}
}
