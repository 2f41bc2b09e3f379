package journal

// A round that fails, or a write function that misbehaves, costs only the
// writes it must: the others commit once, and no write reports an outcome
// that was never committed. They use the helpers of committer_round_test.go.

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoexitInUpdateFnReleasesCommitter: "a caller's bug fails its
// own request, not the committer" (committer.go, protect), and Close never
// hangs. An Update function that ends its goroutine with runtime.Goexit
// (t.FailNow / require.* in a test helper, or any code that calls it)
// unwinds the leader's goroutine past commit without releasing the round
// or clearing busy: every later write, and Close, waits forever.
func TestGoexitInUpdateFnReleasesCommitter(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_, _ = s.Update(ctx, "s", "x", func(*Record) error {
			runtime.Goexit()
			return nil
		})
	}()
	<-exited

	next := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("y", rvT0)) })
	select {
	case r := <-next:
		require.NoError(t, r.err, "write after a function called Goexit")
	case <-time.After(10 * time.Second):
		// The Store is wedged: Close would hang too, so leave it open.
		s.closed.Store(true)
		t.Fatal("write after an Update function called runtime.Goexit never returned: the committer is wedged")
	}
}

// TestCommitFailureNoPhantomOutcomes: "an error always means not
// written" has a converse the Store contract relies on: Create's ErrExists
// returns *the stored record*, and Update's ErrTerminal means the record
// *is* terminal. When a round's commit fails, requests that came after
// another write to the same record keep the error they computed from that
// uncommitted write: a Create gets ErrExists with a record that was never
// stored, an Update gets ErrTerminal for a record that is still open.
func TestCommitFailureNoPhantomOutcomes(t *testing.T) {
	s, path := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)

	release, wait := rvBlock(t, s)
	first := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("new", rvT0)) })
	rvWaitQueued(t, s, 1)
	second := rvGo(func() (*Record, error) { return s.Create(ctx, rvRecord("new", rvT0)) })
	rvWaitQueued(t, s, 2)
	settle := rvGo(func() (*Record, error) {
		return s.Update(ctx, "s", "x", func(r *Record) error {
			r.State, r.Settled = StateSucceeded, rvT0
			return nil
		})
	})
	rvWaitQueued(t, s, 3)
	after := rvGo(func() (*Record, error) {
		return s.Update(ctx, "s", "x", func(r *Record) error {
			r.Review = "x"
			return nil
		})
	})
	rvWaitQueued(t, s, 4)
	rvFailWrites(s, 4) // the blocker's round, then the round of the four, each twice
	release()
	require.Error(t, wait())
	f, sc, st, a := <-first, <-second, <-settle, <-after
	require.Error(t, f.err)
	require.Error(t, st.err)
	_ = s.Close()

	s2, err := Open(path)
	require.NoError(t, err)
	defer s2.Close()
	_, gerr := s2.Get(ctx, "s", "new")
	require.ErrorIs(t, gerr, ErrNotFound, "nothing of the failed round is stored")
	x, err := s2.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Equal(t, StatePending, x.State)

	assert.NotErrorIs(t, sc.err, ErrExists, "Create() reported ErrExists for a record that was never stored")
	assert.NotErrorIs(t, a.err, ErrTerminal, "Update() reported ErrTerminal for a record that is still %s", x.State)
}

// TestPruneKeepsRecordsWrittenMeanwhile: Prune brings the file up to date
// with the log, then deletes from the file. A terminal record written
// again in between (a manual resolution) is neither deleted nor left
// without its latest version: the Resolve's write is what the journal
// holds afterwards.
func TestPruneKeepsRecordsWrittenMeanwhile(t *testing.T) {
	// The applier waits: Prune's own apply is the file's first commit, its
	// deletion the second, however slowly the test runs.
	s, _ := rvOpen(t, withApplyDelay(time.Hour))
	ctx := context.Background()
	for i := range 3 {
		r := rvRecord(fmt.Sprint("done", i), rvT0)
		r.State, r.Settled = StateSucceeded, rvT0
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	commits := 0
	// Under the applier's mutex, which its goroutine holds when it reads
	// the hook.
	s.ap.mu.Lock()
	s.ap.failApply = func() error {
		commits++
		if commits == 2 { // Prune's deletion, after its apply
			_, err := s.Resolve(ctx, "s", "done1", Manual{State: StateFailed, Reason: "refunded", By: "op", At: rvT0})
			require.NoError(t, err)
		}
		return nil
	}
	s.ap.mu.Unlock()
	n, err := s.Prune(ctx, rvT0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n, "the two records nobody wrote meanwhile")
	s.ap.mu.Lock()
	s.ap.failApply = nil
	s.ap.mu.Unlock()
	got, err := s.Get(ctx, "s", "done1")
	require.NoError(t, err)
	require.Equal(t, StateFailed, got.State)
	require.NoError(t, s.viewChecked())
	got, err = s.Get(ctx, "s", "done1")
	require.NoError(t, err, "once applied")
	require.Equal(t, StateFailed, got.State)
	left, err := s.List(ctx, Filter{})
	require.NoError(t, err)
	require.Len(t, left, 1)
}
