package journal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// bump counts, in record "c"'s Ref, the requests that ran against it, and
// reports the count it saw.
func bump(saw *int) func(*view, *request) error {
	rk := recordKey("s", "c")
	return func(v *view, _ *request) error {
		cur, err := v.get(rk)
		if err != nil {
			return err
		}
		r := newRecord("c")
		if cur != nil {
			if r, err = decode(cur); err != nil {
				return err
			}
			*saw, _ = strconv.Atoi(r.Ref)
		}
		r.Ref = strconv.Itoa(*saw + 1)
		v.put(rk, r, encode(nil, r))
		return nil
	}
}

// TestCommitterRoundIsolation: the requests of one round see each other's
// writes in order; a request that fails leaves nothing of its own, and
// does not fail the others.
func TestCommitterRoundIsolation(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"))
	require.NoError(t, err)
	defer s.Close()
	var saw1, saw3, saw5 int
	fnErr := errors.New("fn failed")
	round := []*request{
		{run: bump(&saw1)},
		{run: func(v *view, _ *request) error {
			v.put(recordKey("s", "c"), newRecord("c"), encode(nil, newRecord("c"))) // then fails: dropped
			return fnErr
		}},
		{run: bump(&saw3)}, // same record: sees the first request's write
		{run: bump(&saw5)},
	}
	rvCommit(t, s, round...)
	require.NoError(t, round[0].err)
	require.ErrorIs(t, round[1].err, fnErr)
	require.NoError(t, round[2].err)
	require.NoError(t, round[3].err)
	require.Equal(t, 0, saw1)
	require.Equal(t, 1, saw3, "second write to a record sees the first")
	require.Equal(t, 2, saw5)
	r, err := s.Get(context.Background(), "s", "c")
	require.NoError(t, err)
	require.Equal(t, "3", r.Ref, "counter")
}

func TestCommitterSharesCommits(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"))
	require.NoError(t, err)
	defer s.Close()
	const writers, each = 64, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				body := []byte("b")
				_, err := s.Create(context.Background(), &Record{
					Scope: "s", Key: fmt.Sprintf("%d-%d", w, i), State: StatePending,
					Body: body, BodySHA: sha256.Sum256(body),
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	rounds := s.c.rounds.Load()
	t.Logf("%d writes in %d commits", writers*each, rounds)
	require.Less(t, rounds, int64(writers*each/2), "concurrent writers share commits")
}

func TestCloseDrainsQueuedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	const n = 200
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Go(func() {
			body := []byte("b")
			_, results[i] = s.Create(context.Background(), &Record{
				Scope: "s", Key: fmt.Sprint(i), State: StatePending, Body: body, BodySHA: sha256.Sum256(body),
			})
		})
	}
	require.NoError(t, s.Close())
	wg.Wait()
	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	for i, err := range results {
		_, gerr := s.Get(context.Background(), "s", fmt.Sprint(i))
		if err == nil {
			require.NoError(t, gerr, "acknowledged write %d lost by Close", i)
		} else {
			require.ErrorIs(t, err, ErrClosed, "write %d", i)
			require.ErrorIs(t, gerr, ErrNotFound, "write %d refused but stored", i)
		}
	}
}

func TestDamagedRecord(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	body := []byte("b")
	for _, k := range []string{"future", "garbage"} {
		_, err := s.Create(ctx, &Record{Scope: "s", Key: k, State: StatePending, Body: body, BodySHA: sha256.Sum256(body)})
		require.NoError(t, err)
	}
	require.NoError(t, s.applyAll()) // into the file, out of the overlay
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		b, keys := tx.Bucket(bucketOpen), tx.Bucket(bucketKeys)
		future, garbage := keys.Get(recordKey("s", "future")), keys.Get(recordKey("s", "garbage"))
		v := append([]byte(nil), b.Get(future)...)
		v[2] = recordVersion + 1
		return errors.Join(b.Put(garbage, []byte("not a record")), b.Put(future, v))
	}))
	_, err = s.Get(ctx, "s", "garbage")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.Get(ctx, "s", "future")
	require.ErrorIs(t, err, ErrVersion)
	_, err = s.Update(ctx, "s", "garbage", func(*Record) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
	// List leaves the future record out (Stats counts it), and fails on
	// the damaged one.
	_, err = s.List(ctx, Filter{})
	require.ErrorIs(t, err, ErrCorrupt, "List() past the future record")
	require.NotErrorIs(t, err, ErrVersion)
	_, err = s.List(ctx, Filter{States: []State{StatePending}})
	require.ErrorIs(t, err, ErrCorrupt, "List() through the open index")
	require.NotErrorIs(t, err, ErrVersion)
	// Stats counts the future record (Newer): the damaged one fails it.
	_, err = s.Stats(ctx)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrVersion)
	require.NoError(t, s.Close())
}

// newRecord returns a valid pending record.
func newRecord(key string) *Record {
	body := []byte("b")
	return &Record{Scope: "s", Key: key, State: StatePending, Body: body, BodySHA: sha256.Sum256(body)}
}

// TestLoneWriterCommitsOnItsOwnGoroutine: with nobody else writing, a
// write is committed by its own goroutine, one transaction per write.
func TestLoneWriterCommitsOnItsOwnGoroutine(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		key := fmt.Sprint(i)
		_, err := s.Create(ctx, newRecord(key))
		require.NoError(t, err)
		var stack []byte
		_, err = s.Update(ctx, "s", key, func(r *Record) error {
			stack = make([]byte, 64<<10)
			stack = stack[:runtime.Stack(stack, false)]
			r.Review = "x"
			return nil
		})
		require.NoError(t, err)
		require.Contains(t, string(stack), "TestLoneWriterCommitsOnItsOwnGoroutine", "fn ran on another goroutine")
	}
	require.Equal(t, int64(6), s.c.rounds.Load(), "one transaction per write")
}

// TestConcurrentUpdatesOneRecord: many writers update one record, some with
// a function that fails and some with one that panics. No update is lost
// or applied twice, each function runs exactly once, every update sees
// the ones committed before it, and each panic reaches its own caller
// only.
func TestConcurrentUpdatesOneRecord(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("noSync=%v", noSync), func(t *testing.T) {
			var opts []Option
			if noSync {
				opts = append(opts, WithUnsafeNoSync())
			}
			s, err := Open(filepath.Join(t.TempDir(), "j.db"), opts...)
			require.NoError(t, err)
			defer s.Close()
			ctx := context.Background()
			_, err = s.Create(ctx, newRecord("k"))
			require.NoError(t, err)

			const writers, each = 64, 20
			var calls [writers][each]atomic.Int32
			var ok atomic.Int64
			fnErr := errors.New("fn failed")
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						kind := (w*each + i) % 10 // 0: fails, 1: panics, else: appends an attempt
						id := fmt.Sprintf("%d/%d", w, i)
						var got *Record
						var err error
						var panicked any
						func() {
							defer func() { panicked = recover() }()
							got, err = s.Update(ctx, "s", "k", func(r *Record) error {
								calls[w][i].Add(1)
								switch kind {
								case 0:
									r.Review = "must not stick"
									return fnErr
								case 1:
									r.Review = "must not stick"
									panic(id)
								}
								r.Attempts = append(r.Attempts, Attempt{Number: len(r.Attempts) + 1, Err: id})
								return nil
							})
						}()
						switch kind {
						case 0:
							if !errors.Is(err, fnErr) || panicked != nil {
								t.Errorf("%s: failing fn: err %v, panic %v", id, err, panicked)
							}
						case 1:
							if panicked != id {
								t.Errorf("%s: panicking fn: caller got panic %v, err %v", id, panicked, err)
							}
						default:
							if err != nil || panicked != nil {
								t.Errorf("%s: err %v, panic %v", id, err, panicked)
								continue
							}
							last := got.Attempts[len(got.Attempts)-1]
							if last.Err != id || last.Number != len(got.Attempts) {
								t.Errorf("%s: returned record ends with %+v", id, last)
							}
							ok.Add(1)
						}
					}
				})
			}
			wg.Wait()
			for w := range writers {
				for i := range each {
					require.Equal(t, int32(1), calls[w][i].Load(), "fn %d/%d calls", w, i)
				}
			}
			r, err := s.Get(ctx, "s", "k")
			require.NoError(t, err)
			require.Empty(t, r.Review)
			require.Len(t, r.Attempts, int(ok.Load()), "updates lost or doubled")
			seen := map[string]bool{}
			for i, a := range r.Attempts {
				require.Equal(t, i+1, a.Number, "attempt %d saw a stale record", i)
				require.False(t, seen[a.Err], "update %s applied twice", a.Err)
				seen[a.Err] = true
			}
			t.Logf("%d writes in %d commits", writers*each, s.c.rounds.Load())
		})
	}
}

// TestCloseDuringLoad: Close while many writers create and update. No
// writer hangs; each write either returns ErrClosed or is in the file
// after reopening; the indexes match the records.
func TestCloseDuringLoad(t *testing.T) {
	for run := range 5 {
		path := filepath.Join(t.TempDir(), "j.db")
		s, err := Open(path)
		require.NoError(t, err)
		ctx := context.Background()
		const writers = 64
		var mu sync.Mutex
		acked := map[string]State{}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := 0; ; i++ {
					key := fmt.Sprintf("%d-%d", w, i)
					if _, err := s.Create(ctx, newRecord(key)); err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Create(%s): %v", key, err)
						}
						return
					}
					mu.Lock()
					acked[key] = StatePending
					mu.Unlock()
					_, err := s.Update(ctx, "s", key, func(r *Record) error {
						r.State = StateSucceeded
						r.Settled = t0
						return nil
					})
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Update(%s): %v", key, err)
						}
						return
					}
					mu.Lock()
					acked[key] = StateSucceeded
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(10+run*10) * time.Millisecond)
		require.NoError(t, s.Close())
		wg.Wait()
		_, err = s.Create(ctx, newRecord("late"))
		require.ErrorIs(t, err, ErrClosed)

		s, err = Open(path)
		require.NoError(t, err)
		for key, st := range acked {
			r, err := s.Get(ctx, "s", key)
			require.NoError(t, err, "acknowledged %s lost by Close", key)
			if st == StateSucceeded {
				require.Equal(t, st, r.State, key)
			}
		}
		require.NoError(t, s.viewChecked())
		require.NoError(t, s.Close())
		t.Logf("run %d: %d records acknowledged", run, len(acked))
	}
}

// TestRoundLimit: more writers queue during one commit than a round holds;
// they are carried out in several rounds, each once.
func TestRoundLimit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	_, err = s.Create(ctx, newRecord("slow"))
	require.NoError(t, err)
	started := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := s.Update(ctx, "s", "slow", func(*Record) error {
			close(started)
			<-release
			return nil
		})
		require.NoError(t, err)
	})
	<-started
	const n = maxRound*2 + 10
	var queued sync.WaitGroup
	for i := range n {
		queued.Add(1)
		wg.Go(func() {
			queued.Done()
			_, err := s.Create(ctx, newRecord(fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
			}
		})
	}
	queued.Wait()
	rvWaitQueued(t, s, n)
	before := s.c.rounds.Load()
	close(release)
	wg.Wait()
	require.Equal(t, int64(3), s.c.rounds.Load()-before, "rounds for %d queued writes", n)
	recs, err := s.List(ctx, Filter{})
	require.NoError(t, err)
	require.Len(t, recs, n+1)
}

// TestCommitPanicEndsProcess: a panic in a commit that does not come from
// a caller's function (bbolt's, or the journal's own) ends the process, as
// it did when commits ran on a goroutine of their own, even though the
// leader that hit it runs on a caller's goroutine and that caller
// recovers: otherwise the round's other writers would wait forever.
func TestCommitPanicEndsProcess(t *testing.T) {
	// The child dies before its own t.TempDir cleanup could run, so it
	// works in the parent's.
	if dir := os.Getenv("IDEM_COMMIT_PANIC_DIR"); dir != "" {
		s, err := Open(filepath.Join(dir, "j.db"))
		require.NoError(t, err)
		func() {
			defer func() { fmt.Println("RECOVERED", recover()) }()
			_ = s.c.do(&request{
				run: func(*view, *request) error { panic("boom in commit") },
			})
		}()
		time.Sleep(5 * time.Second) // the process should be gone by now
		fmt.Println("SURVIVED")
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitPanicEndsProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "IDEM_COMMIT_PANIC_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "child output:\n%s", out)
	require.Equal(t, 2, exit.ExitCode(), "exit code of a Go panic; output:\n%s", out)
	require.Contains(t, string(out), "journal: commit panicked: boom in commit")
	require.NotContains(t, string(out), "RECOVERED")
	require.NotContains(t, string(out), "SURVIVED")
}

// TestConcurrentWritersKeepTheirBytes: concurrent writes of records of many
// sizes (small and large, above what a log round's buffer keeps between
// rounds) each store exactly their own bytes: a reused buffer never leaks
// into another record.
func TestConcurrentWritersKeepTheirBytes(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	const writers, each = 32, 40
	const big = 16 << 10
	want := make([][]*Record, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			src := rand.NewChaCha8([32]byte{byte(w)})
			rng := rand.New(src)
			for i := range each {
				body := make([]byte, rng.IntN(3*big))
				_, _ = src.Read(body)
				rec := newRecord(fmt.Sprintf("%d-%d", w, i))
				rec.Body, rec.BodySHA = body, sha256.Sum256(body)
				if _, err := s.Create(ctx, rec); err != nil {
					t.Error(err)
					return
				}
				errText := strings.Repeat(string(rune('a'+w%26)), rng.IntN(2*big))
				got, err := s.Update(ctx, "s", rec.Key, func(r *Record) error {
					r.Attempts = append(r.Attempts, Attempt{Number: 1, Err: errText})
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				want[w] = append(want[w], got)
			}
		})
	}
	wg.Wait()
	for w := range writers {
		for _, r := range want[w] {
			got, err := s.Get(ctx, "s", r.Key)
			require.NoError(t, err)
			require.Equal(t, r, got, "record %s", r.Key)
		}
	}
	require.NoError(t, s.viewChecked())
}
