package bench

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// journalVersion keys the cached journals, with a digest of the journal
// package's source (journalSourceDigest): change it when the records they
// hold change. The digest covers layout changes made without a format
// version bump.
const journalVersion = "v3"

// journalSourceDigest is the first 12 hex digits of the SHA-256 of the
// journal package's non-test Go files, read from ../journal.
func journalSourceDigest(tb testing.TB) string {
	files, err := filepath.Glob(filepath.Join("..", "journal", "*.go"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("journal sources not found from %s: %v", must(os.Getwd()), err)
	}
	h := sha256.New()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		h.Write([]byte(filepath.Base(f)))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:12]
}

func must[T any](v T, _ error) T { return v }

var cold = flag.Bool("cold", false, "BenchmarkResume: also time cold start-ups (syncs and drops the page cache before each; needs root)")

// resumeBody is the body of the journaled operations: a typical small
// payment request, 256 bytes.
var resumeBody = body[:254:254]

var resumeBodyFull = append(append([]byte{}, resumeBody...), `"}`...)

// The cached journals' operations point at this host; dialTo sends them to
// this run's server.
const resumeHost = "http://api.bench.invalid"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cachedJournal returns the path of a journal holding settled succeeded
// operations and open ones (unknown, their one submit attempt without an
// outcome: "maybe sent"), building it once under os.TempDir().
func cachedJournal(tb testing.TB, settled, open int) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "idem-bench")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("resume-%s-%s-%d-settled-%d-open.journal", journalVersion, journalSourceDigest(tb), settled, open))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	start := time.Now()
	tmp := path + ".building"
	_ = os.Remove(tmp)
	s, err := journal.Open(tmp, journal.WithUnsafeNoSync())
	if err != nil {
		tb.Fatal(err)
	}
	if err := fill(s, settled, open, 64); err != nil {
		tb.Fatal(err)
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	// Loaded in a few seconds, the journal was copied from its log into
	// the file in transactions of thousands of records, whose free pages
	// a journal filled over hours would have reused: compacted, the file
	// is what a running journal's is, not a bulk load's (whose freelist
	// alone costs each Open a few milliseconds more).
	if _, err := journal.Compact(tmp); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
	fi, _ := os.Stat(path)
	tb.Logf("built %s (%d MB) in %v", path, fi.Size()>>20, time.Since(start).Round(time.Second))
	return path
}

// fill creates settled+open operations from writers goroutines, the way
// idem's Submit does: a Create with the first attempt, then an Update with
// its outcome. The writers share the journal's commits.
func fill(s *journal.Store, settled, open, writers int) error {
	ctx := context.Background()
	sha := sha256.Sum256(resumeBodyFull)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= settled+open {
					return
				}
				if err := fillOne(ctx, s, i, i < settled, sha); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func fillOne(ctx context.Context, s *journal.Store, i int, settle bool, sha [32]byte) error {
	key := uuid.NewString()
	at := t0.Add(time.Duration(i) * time.Millisecond)
	rec := &journal.Record{
		Scope: "acct_bench", Key: key, Ref: fmt.Sprintf("draft-%d", i),
		Method: http.MethodPost, URL: resumeHost + "/v1/orders",
		QueryURL: resumeHost + "/operations/" + url.PathEscape(key),
		Header:   http.Header{"Content-Type": {"application/json"}},
		Body:     resumeBodyFull, BodySHA: sha,
		State: journal.StatePending, Created: at, Updated: at, FirstSent: at,
		NextDue:  at.Add(30 * time.Second),
		Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: at}},
	}
	if _, err := s.Create(ctx, rec); err != nil {
		return err
	}
	_, err := s.Update(ctx, rec.Scope, key, func(r *journal.Record) error {
		done := at.Add(3 * time.Millisecond)
		r.Updated = done
		if !settle {
			// The process died mid-attempt: the attempt has no outcome.
			r.State = journal.StateUnknown
			r.NextDue = done
			return nil
		}
		r.Attempts[0].Done, r.Attempts[0].Wrote = true, true
		r.Attempts[0].Status, r.Attempts[0].Duration = http.StatusCreated, 3*time.Millisecond
		r.State, r.Settled, r.NextDue = journal.StateSucceeded, done, time.Time{}
		r.Result = &journal.Result{ResourceID: fmt.Sprintf("ord_%d", i), StatusCode: http.StatusCreated,
			Body: []byte(fmt.Sprintf(`{"state":"succeeded","resourceId":"ord_%d"}`, i))}
		return nil
	})
	return err
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// enumTimer is the journal with a stopwatch on ForEachOpen: it notes when
// Resume has enumerated the open operations and then cancels Resume's
// context, so that Resume stops before sending anything and the journal
// stays as it was for the next iteration.
type enumTimer struct {
	*journal.Store
	visited int
	done    time.Time
	cancel  context.CancelFunc
}

func (s *enumTimer) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	err := s.Store.ForEachOpen(ctx, func(r *journal.Record) error {
		s.visited++
		return fn(r)
	})
	s.done = time.Now()
	if s.cancel != nil {
		s.cancel()
	}
	return err
}

const resumeOpen = 1000

// BenchmarkResume is target 3: start-up over a journal of 10,000 or
// 1,000,000 settled operations plus 1,000 open ones, warm (the file is in
// the page cache: it was just copied).
//
// enumerate: one iteration is journal.Open + idem.New + Resume up to the
// point where Resume has enumerated the 1,000 open operations (Resume is
// then cancelled; nothing is sent); open-ms and enum-ms split it, and
// scan-ms is a second Store.ForEachOpen on the open Store.
//
// drive: Resume in full, fsync on, against the plain server (it answers
// every result query at once: succeeded); each iteration first adds 1,000
// new open operations, untimed. It shows what the scan is next to the work.
func BenchmarkResume(b *testing.B) {
	sizes := []int{10_000, 1_000_000}
	paths := map[int]string{}
	for _, n := range sizes {
		paths[n] = cachedJournal(b, n, resumeOpen)
	}
	addr := strings.TrimPrefix(servers.plain, "http://")
	for r := range *rounds {
		for i := range sizes {
			n := sizes[(r+i)%len(sizes)]
			copyPath := filepath.Join(b.TempDir(), "journal")
			if err := copyFile(copyPath, paths[n]); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("round=%d/settled=%d/enumerate", r+1, n), func(b *testing.B) {
				benchEnumerate(b, copyPath, addr)
			})
			if *cold {
				b.Run(fmt.Sprintf("round=%d/settled=%d/cold", r+1, n), func(b *testing.B) {
					benchCold(b, copyPath, addr)
				})
			}
			b.Run(fmt.Sprintf("round=%d/settled=%d/drive", r+1, n), func(b *testing.B) {
				benchDrive(b, copyPath, addr)
			})
			_ = os.Remove(copyPath)
		}
	}
}

// startUp opens the journal and runs Resume until it has enumerated the
// open operations, and returns how long each part took.
func startUp(b *testing.B, path, addr string) (open, enum, scan time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := time.Now()
	s, err := journal.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	st := &enumTimer{Store: s, cancel: cancel}
	c, err := idem.New(st, idem.WithHTTPClient(&http.Client{Transport: dialTo(addr)}))
	if err != nil {
		b.Fatal(err)
	}
	opened := time.Now()
	sum, err := c.Resume(ctx)
	if !errors.Is(err, context.Canceled) || sum.Visited != resumeOpen || st.visited != resumeOpen {
		b.Fatalf("Resume = %+v, %v; visited %d; want %d visited, context.Canceled", sum, err, st.visited, resumeOpen)
	}
	open, enum = opened.Sub(t), st.done.Sub(opened)
	b.StopTimer()
	t = time.Now()
	k := 0
	if err := s.ForEachOpen(context.Background(), func(*journal.Record) error { k++; return nil }); err != nil || k != resumeOpen {
		b.Fatalf("ForEachOpen: %d records, %v", k, err)
	}
	scan = time.Since(t)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return open, enum, scan
}

func benchEnumerate(b *testing.B, path, addr string) {
	b.ReportAllocs()
	var open, enum, scan time.Duration
	for b.Loop() {
		o, e, s := startUp(b, path, addr)
		open, enum, scan = open+o, enum+e, scan+s
	}
	n := float64(b.N)
	b.ReportMetric(float64(open.Microseconds())/n/1e3, "open-ms")
	b.ReportMetric(float64(enum.Microseconds())/n/1e3, "enum-ms")
	b.ReportMetric(float64((open+enum).Microseconds())/n/1e3, "startup-ms")
	b.ReportMetric(float64(scan.Microseconds())/n/1e3, "scan-ms")
}

// benchCold drops the page cache before each start-up.
func benchCold(b *testing.B, path, addr string) {
	var open, enum time.Duration
	for b.Loop() {
		b.StopTimer()
		syscall.Sync() // drop_caches drops only clean pages
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
			b.Skip("cannot drop the page cache:", err)
		}
		b.StartTimer()
		o, e, _ := startUp(b, path, addr)
		open, enum = open+o, enum+e
	}
	n := float64(b.N)
	b.ReportMetric(float64(open.Microseconds())/n/1e3, "open-ms")
	b.ReportMetric(float64(enum.Microseconds())/n/1e3, "enum-ms")
	b.ReportMetric(float64((open+enum).Microseconds())/n/1e3, "startup-ms")
}

func benchDrive(b *testing.B, path, addr string) {
	ctx := context.Background()
	s, err := journal.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := idem.New(s, idem.WithHTTPClient(&http.Client{Transport: dialTo(addr)}))
	if err != nil {
		b.Fatal(err)
	}
	// Settle the open operations the file came with, untimed.
	if _, err := c.Resume(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := fill(s, 0, resumeOpen, 64); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		sum, err := c.Resume(ctx)
		if err != nil || sum.Visited != resumeOpen || sum.Succeeded != resumeOpen {
			b.Fatalf("Resume = %+v, %v; want %d succeeded", sum, err, resumeOpen)
		}
	}
	b.ReportMetric(float64(resumeOpen)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
