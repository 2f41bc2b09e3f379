package journal

// Commit rounds: several writes share one commit, and each is applied,
// reported and made durable as if it had committed alone. The rv*
// helpers here are shared by the package's internal tests.
//
// Several tests need two or more writes in one commit round, in a known
// order. They get it without timing: a "blocker" Update leads a round and
// waits inside its function; the writes under test queue behind it (the
// test waits until the committer's queue holds them); releasing the
// blocker hands the lead to the oldest queued write, whose round holds
// them all, in queue order.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var rvT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rvRecord returns a valid pending record in scope "s", due at due.
func rvRecord(key string, due time.Time) *Record {
	body := []byte(`{"order":"` + key + `"}`)
	return &Record{
		Scope: "s", Key: key, Method: http.MethodPost, URL: "https://api.example.com/orders",
		Body: body, BodySHA: sha256.Sum256(body), State: StatePending,
		Created: rvT0, Updated: rvT0, NextDue: due,
	}
}

// rvOpen opens a new journal. The cleanup closes it and checks its
// indexes, unless the test has already closed it.
func rvOpen(t *testing.T, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s.closed.Load() {
			return
		}
		require.NoError(t, s.viewChecked(), "indexes")
		require.NoError(t, s.Close())
	})
	return s, path
}

// rvWaitQueued waits until n writes wait in the committer's queue behind
// the current leader.
func rvWaitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := s.c.q.Len()
		if got >= n {
			require.Equal(t, n, got, "queued writes")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", got, n)
		}
		runtime.Gosched()
	}
}

// rvCommit carries out reqs as one round of s's committer, in their order,
// and returns once every one of them is released. A blocker that writes
// nothing leads the round before, while reqs queue behind it.
func rvCommit(t *testing.T, s *Store, reqs ...*request) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.c.do(&request{run: func(*view, *request) error {
			close(started)
			<-rel
			return nil
		}})
	})
	<-started
	for i, r := range reqs {
		wg.Go(func() {
			if err := s.c.do(r); err != nil {
				r.err = err
			}
		})
		rvWaitQueued(t, s, i+1)
	}
	before := s.c.rounds.Load()
	close(rel)
	wg.Wait()
	require.Equal(t, int64(1), s.c.rounds.Load()-before, "the requests' rounds")
	for i, r := range reqs {
		require.True(t, r.Released(), "request %d not released", i)
	}
}

// rvBlock creates record "blk" and starts an Update of it whose function
// waits until release is called: its writer leads a round, and later
// writes queue behind it. wait returns the blocker's error.
func rvBlock(t *testing.T, s *Store) (release func(), wait func() error) {
	t.Helper()
	_, err := s.Create(context.Background(), rvRecord("blk", rvT0))
	require.NoError(t, err)
	started, rel := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release) // a test that fails half-way must not wedge Close
	errc := make(chan error, 1)
	go func() {
		_, err := s.Update(context.Background(), "s", "blk", func(r *Record) error {
			close(started)
			<-rel
			r.Review = "blocked a round"
			return nil
		})
		errc <- err
	}()
	<-started
	return release, func() error { return <-errc }
}

type rvResult struct {
	rec *Record
	err error
}

// rvGo runs op on its own goroutine and returns the channel of its result.
func rvGo(op func() (*Record, error)) <-chan rvResult {
	c := make(chan rvResult, 1)
	go func() {
		r, err := op()
		c <- rvResult{r, err}
	}()
	return c
}

// errInjected is the disk failure the tests inject.
var errInjected = errors.New("injected I/O error")

// rvFailWrites makes the log's next n writes of a round's bytes fail with
// errInjected, as a disk returning EIO would (each round tries twice);
// new segments' headers are written normally.
func rvFailWrites(s *Store, n int) {
	left := n
	s.log.failWrite = func(header, written bool) error {
		if header || written || left == 0 {
			return nil
		}
		left--
		return errInjected
	}
}

// TestCommitFailureReportsNoSuccess checks the committer's failure path
// (promise 8, and "an error always means not written"): when the log
// write of a round fails, every write in it reports an error, none of
// them is in the journal, after a reopen either, and the rounds after it
// commit normally.
func TestCommitFailureReportsNoSuccess(t *testing.T) {
	s, path := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("b", rvT0))
	require.NoError(t, err)

	release, wait := rvBlock(t, s)
	create := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("a", rvT0)) })
	rvWaitQueued(t, s, 1)
	update := rvGo(func() (*Record, error) {
		return s.Update(ctx, "s", "b", func(r *Record) error {
			r.State, r.Settled = StateSucceeded, rvT0
			return nil
		})
	})
	rvWaitQueued(t, s, 2)
	rvFailWrites(s, 4) // the blocker's round, then the round of the two, each twice
	release()
	require.ErrorIs(t, wait(), errInjected, "blocker's commit")
	c, u := <-create, <-update
	require.ErrorIs(t, c.err, errInjected, "Create() in a failed commit")
	require.ErrorIs(t, u.err, errInjected, "Update() in a failed commit")
	require.NotErrorIs(t, c.err, ErrMaybeCommitted, "the new segment voided the round")
	_, err = s.Get(ctx, "s", "a")
	require.ErrorIs(t, err, ErrNotFound, "failed Create() visible")
	_, err = s.Create(ctx, rvRecord("later", rvT0))
	require.NoError(t, err, "a round after the failure")
	require.NoError(t, s.Close())

	s2, err := Open(path)
	require.NoError(t, err)
	defer s2.Close()
	_, err = s2.Get(ctx, "s", "a")
	require.ErrorIs(t, err, ErrNotFound, "failed Create() in the journal")
	b, err := s2.Get(ctx, "s", "b")
	require.NoError(t, err)
	require.Equal(t, StatePending, b.State, "failed Update() in the journal")
	_, err = s2.Get(ctx, "s", "later")
	require.NoError(t, err)
	require.NoError(t, s2.viewChecked())
}

// TestSameRecordTwiceInOneRound checks two writes to one record in
// one round (Store contract: Update returns ErrTerminal without calling fn
// once the record is terminal; every update sees the ones before it).
func TestSameRecordTwiceInOneRound(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)

	release, wait := rvBlock(t, s)
	settle := rvGo(func() (*Record, error) {
		return s.Update(ctx, "s", "x", func(r *Record) error {
			r.State, r.Settled = StateSucceeded, rvT0.Add(time.Minute)
			return nil
		})
	})
	rvWaitQueued(t, s, 1)
	called := false
	late := rvGo(func() (*Record, error) {
		return s.Update(ctx, "s", "x", func(r *Record) error {
			called = true
			r.State = StatePending
			return nil
		})
	})
	rvWaitQueued(t, s, 2)
	create := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("z", rvT0)) })
	rvWaitQueued(t, s, 3)
	follow := rvGo(func() (*Record, error) {
		return s.Update(ctx, "s", "z", func(r *Record) error {
			r.State = StateProcessing
			return nil
		})
	})
	rvWaitQueued(t, s, 4)
	resolve := rvGo(func() (*Record, error) {
		return s.Resolve(ctx, "s", "z", Manual{State: StateFailed, Reason: "by hand", By: "op", At: rvT0.Add(time.Hour)})
	})
	rvWaitQueued(t, s, 5)
	release()
	require.NoError(t, wait())

	st, l, c, f, r := <-settle, <-late, <-create, <-follow, <-resolve
	require.NoError(t, st.err)
	require.ErrorIs(t, l.err, ErrTerminal, "second Update() in the round")
	require.False(t, called, "fn called on a record settled earlier in the round")
	require.NoError(t, c.err)
	require.NoError(t, f.err, "Update() of a record created earlier in the round")
	require.NoError(t, r.err)
	require.Equal(t, StateProcessing, r.rec.Resolved.From, "Resolve() saw the Update() before it")

	x, err := s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Equal(t, st.rec, x)
	z, err := s.Get(ctx, "s", "z")
	require.NoError(t, err)
	require.Equal(t, r.rec, z)
}

// TestQueuedWriteSurvivesCancel checks the Store's ctx rule: once a
// write has been queued it is carried out even if its context ends, and it
// reports success only because it committed.
func TestQueuedWriteSurvivesCancel(t *testing.T) {
	s, _ := rvOpen(t)
	release, wait := rvBlock(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	create := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("a", rvT0)) })
	rvWaitQueued(t, s, 1)
	cancel()
	release()
	require.NoError(t, wait())
	c := <-create
	require.NoError(t, c.err, "queued Create() with a context cancelled while it waited")
	got, err := s.Get(context.Background(), "s", "a")
	require.NoError(t, err)
	require.Equal(t, c.rec, got)
}

// TestCloseWaitsForQueuedWrites checks Close against writers (Store
// contract: every write is durable when it returns without error; every
// method returns ErrClosed after Close). Close waits for the round in
// progress and for the writes queued behind it; a write that arrives once
// Close has begun is refused; every acknowledged write is in the file.
func TestCloseWaitsForQueuedWrites(t *testing.T) {
	s, path := rvOpen(t)
	ctx := context.Background()
	release, wait := rvBlock(t, s)
	queued := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("a", rvT0)) })
	rvWaitQueued(t, s, 1)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for !s.closed.Load() {
		runtime.Gosched()
	}
	_, err := s.Create(ctx, rvRecord("late", rvT0))
	require.ErrorIs(t, err, ErrClosed, "Create() once Close has begun")
	select {
	case err := <-closed:
		t.Fatalf("Close() returned (%v) while a round was in progress", err)
	default:
	}
	release()
	require.NoError(t, wait(), "the leader's write")
	q := <-queued
	require.NoError(t, q.err, "the write queued before Close")
	require.NoError(t, <-closed)

	s2, err := Open(path)
	require.NoError(t, err)
	defer s2.Close()
	for _, k := range []string{"blk", "a"} {
		r, err := s2.Get(ctx, "s", k)
		require.NoError(t, err, "acknowledged %s lost", k)
		if k == "blk" {
			require.Equal(t, "blocked a round", r.Review)
		}
	}
	_, err = s2.Get(ctx, "s", "late")
	require.ErrorIs(t, err, ErrNotFound)
}

// TestManyWritesOfOneRecordInOneRound: a round finds its staged writes by
// searching them in order while it has few (the first eight in the view's
// own array) and through a map past stagedScan. Across both switches,
// each write must see the one just before it, not an older one, for the
// record written again and again and for records created mid-round; and
// what the round logs is the last of each.
func TestManyWritesOfOneRecordInOneRound(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)

	const n = 2*stagedScan + 3
	release, wait := rvBlock(t, s)
	var results []<-chan rvResult
	for i := range n {
		var op func() (*Record, error)
		switch {
		case i%5 == 4: // a record of its own, created mid-round
			op = func() (*Record, error) { return s.Create(ctx, rvRecord(fmt.Sprintf("y%02d", i), rvT0)) }
		case i%5 == 3: // and written again at once
			op = func() (*Record, error) {
				return s.Update(ctx, "s", fmt.Sprintf("y%02d", i+1), func(r *Record) error {
					return errors.New("created later in the round: must not be found yet")
				})
			}
		default:
			op = func() (*Record, error) {
				return s.Update(ctx, "s", "x", func(r *Record) error {
					r.Attempts = append(r.Attempts, Attempt{Number: len(r.Attempts) + 1, Kind: AttemptSubmit, Start: rvT0})
					return nil
				})
			}
		}
		results = append(results, rvGo(op))
		rvWaitQueued(t, s, i+1)
	}
	before := s.c.rounds.Load()
	release()
	require.NoError(t, wait())

	attempts := 0
	for i, c := range results {
		res := <-c
		switch {
		case i%5 == 4:
			require.NoError(t, res.err, "write %d: Create()", i)
		case i%5 == 3:
			require.ErrorIs(t, res.err, ErrNotFound, "write %d: Update() of a record created after it", i)
		default:
			require.NoError(t, res.err, "write %d: Update()", i)
			attempts++
			require.Len(t, res.rec.Attempts, attempts, "write %d saw an older version of the record", i)
		}
	}
	require.Equal(t, int64(1), s.c.rounds.Load()-before, "rounds after the blocker's")
	x, err := s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Len(t, x.Attempts, attempts, "Get() after the round")
	for i := range n {
		if i%5 == 4 {
			_, err := s.Get(ctx, "s", fmt.Sprintf("y%02d", i))
			require.NoError(t, err, "Get(y%02d)", i)
		}
	}
}
