package journal

// Review tests that FAIL on the reviewed code: each shows a bug. They use
// the helpers of review_test.go.

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestReviewGoexitInUpdateFnReleasesCommitter: "a caller's bug fails its
// own request, not the committer" (committer.go, protect), and Close never
// hangs. An Update function that ends its goroutine with runtime.Goexit
// (t.FailNow / require.* in a test helper, or any code that calls it)
// unwinds the leader's goroutine past commit without releasing the round
// or clearing busy: every later write, and Close, waits forever.
func TestReviewGoexitInUpdateFnReleasesCommitter(t *testing.T) {
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

// TestReviewCommitFailureNoPhantomOutcomes: "an error always means not
// written" has a converse the Store contract relies on: Create's ErrExists
// returns *the stored record*, and Update's ErrTerminal means the record
// *is* terminal. When a round's commit fails, requests that came after
// another write to the same record keep the error they computed from that
// uncommitted write: a Create gets ErrExists with a record that was never
// stored, an Update gets ErrTerminal for a record that is still open.
func TestReviewCommitFailureNoPhantomOutcomes(t *testing.T) {
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
	require.NoError(t, rvBoltFile(s.db).Close()) // the next commits fail to write
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

// TestReviewPruneRetriedAfterTxFailure: Prune "deletes terminal records
// settled before the cut-off". When another write in its round breaks the
// transaction, the committer re-runs Prune's function on a fresh
// transaction (committer.commit, txFailure case), but the function's
// cursor position (after) survived the rolled-back run: the retry starts
// past every record the first run deleted, deletes none of them, and
// Prune returns 0 with no error.
func TestReviewPruneRetriedAfterTxFailure(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	for i := range 3 {
		r := rvRecord(fmt.Sprint("done", i), rvT0)
		r.State, r.Settled = StateSucceeded, rvT0
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	release, wait := rvBlock(t, s)
	var n int
	pruned := make(chan error, 1)
	go func() {
		var err error
		n, err = s.Prune(ctx, rvT0.Add(time.Hour))
		pruned <- err
	}()
	rvWaitQueued(t, s, 1)
	bad := rvBreakTx(s)
	rvWaitQueued(t, s, 2)
	release()
	require.NoError(t, wait())
	require.ErrorIs(t, <-bad, errInjected)
	require.NoError(t, <-pruned)

	left, err := s.List(ctx, Filter{States: []State{StateSucceeded}})
	require.NoError(t, err)
	require.Equal(t, 3, n+len(left), "Prune()'s count matches what it deleted")
	require.Empty(t, left, "terminal records settled before the cut-off survived Prune()")
}

// TestReviewForEachOpenVisitsRecordRescheduledLater: ForEachOpen "calls fn
// for every open record"; its only stated exceptions are records created,
// or moved to an earlier NextDue, during the walk. A record not yet
// visited that a concurrent writer (the reconciler, a foreground call)
// moves to a *later* NextDue, past the index's last entry when the walk
// began, is never visited: the walk stops at that entry (end).
func TestReviewForEachOpenVisitsRecordRescheduledLater(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	const n = openPage + 44
	for i := range n {
		_, err := s.Create(ctx, rvRecord(fmt.Sprintf("k%04d", i), rvT0.Add(time.Duration(i)*time.Second)))
		require.NoError(t, err)
	}
	last := fmt.Sprintf("k%04d", n-1)
	visited := map[string]bool{}
	err := s.ForEachOpen(ctx, func(r *Record) error {
		if len(visited) == 0 {
			// Another writer reschedules a record the walk has not reached.
			_, err := s.Update(ctx, "s", last, func(u *Record) error {
				u.NextDue = rvT0.Add(24 * time.Hour)
				return nil
			})
			require.NoError(t, err)
		}
		visited[r.Key] = true
		return nil
	})
	require.NoError(t, err)
	require.True(t, visited[last], "open record %s, moved later during the walk, never visited", last)
	require.Len(t, visited, n)
}

// TestReviewCreateOversizedKeyIsInvalid: Create's record "must satisfy the
// journal's rules (see ErrInvalid)", and ErrInvalid means "breaks the
// journal's rules; nothing was written". A (scope, key) too long for
// bbolt's 32 KiB key limit passes validate, reaches the transaction and
// fails there with bbolt's bare "key too large", which the caller cannot
// tell from an I/O failure (and which, for a key of 32761 to 32768 bytes,
// fails after half the write: records.Put succeeded, the index Put did
// not).
func TestReviewCreateOversizedKeyIsInvalid(t *testing.T) {
	s, _ := rvOpen(t)
	hugeKey := strings.Repeat("k", bolt.MaxKeySize+100)
	_, err := s.Create(context.Background(), rvRecord(hugeKey, rvT0))
	require.ErrorIs(t, err, ErrInvalid, "Create() with a key bbolt cannot store")
}

// TestReviewDecodeAllocationBounded: decode promises to allocate "no more
// than a small multiple of len(b)". A header count is checked against the
// bytes left at 2 bytes an entry, then used as the map's size hint: a
// damaged record of 1 MiB makes decode allocate about 48 MiB before it
// fails (a 100 MiB value, about 5 GiB). The other counts cost at most
// 16 times their input.
func TestReviewDecodeAllocationBounded(t *testing.T) {
	const size = 1 << 20
	b := []byte{magic0, magic1, formatVersion, 1, 0, 0, 0, 0, 0, 0, 0}
	b = binary.AppendUvarint(b, size/2-8)
	b = append(b, make([]byte, size)...)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err := decode(b)
	runtime.ReadMemStats(&m1)
	require.ErrorIs(t, err, ErrCorrupt)
	ratio := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(len(b))
	require.LessOrEqual(t, ratio, 20.0, "decode allocated %.0f times the record's size", ratio)
}

// TestReviewOpenWaitingDuringCompactUsesTheNewFile: Compact "holds the
// journal's lock throughout" and renames the copy over the journal. A
// process that starts meanwhile (the application, restarted by its
// supervisor) has already opened the *old* file when it waits for the
// lock; when Compact releases it, that process locks and writes the old,
// now unlinked, inode. Every write it acknowledges is lost when it exits:
// promise 1 and the Store contract ("durable when it returns"), and
// promise 9 (single writer: the new file has no lock holder at all).
//
// The test does to the file what Compact does, with the waiting Open
// between its steps; Linux only (it watches /proc/self/fd to know the
// waiter has the old file open).
func TestReviewOpenWaitingDuringCompactUsesTheNewFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("watches /proc/self/fd")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	holder, err := Open(path) // Compact's source Store, holding the lock
	require.NoError(t, err)
	_, err = holder.Create(ctx, rvRecord("before", rvT0))
	require.NoError(t, err)

	type opened struct {
		s   *Store
		err error
	}
	waiter := make(chan opened, 1)
	go func() {
		s, err := Open(path, WithLockTimeout(time.Minute))
		waiter <- opened{s, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for rvOpenFDs(t, path) < 2 {
		require.True(t, time.Now().Before(deadline), "the waiter never opened the file")
		runtime.Gosched()
	}

	// Compact: copy, sync, rename over the journal, then close the source.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".compact", data, 0o600))
	require.NoError(t, os.Rename(path+".compact", path))
	require.NoError(t, holder.Close())

	w := <-waiter
	require.NoError(t, w.err)
	_, err = w.s.Create(ctx, rvRecord("after", rvT0))
	require.NoError(t, err, "acknowledged write")
	require.NoError(t, w.s.Close())

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "after")
	require.NoError(t, err, "a write acknowledged by a Store that waited out a Compact is not in the journal")
}

// rvOpenFDs counts this process's descriptors open on path.
func rvOpenFDs(t *testing.T, path string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			n++
		}
	}
	return n
}
