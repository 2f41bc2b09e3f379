package journal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failFileCommits makes every later commit of the file fail with EIO,
// once written or before anything is (see applier.failCommit); nil stops
// the failures.
func failFileCommits(s *Store, written *bool) {
	s.ap.mu.Lock()
	defer s.ap.mu.Unlock()
	if written == nil {
		s.ap.failCommit = nil
		return
	}
	s.ap.failCommit = func(w bool) error {
		if w == *written {
			return syscall.EIO
		}
		return nil
	}
}

// settledRecord is rvRecord, succeeded at rvT0.
func settledRecord(key string) *Record {
	r := rvRecord(key, rvT0)
	r.State, r.Settled = StateSucceeded, rvT0
	return r
}

// TestPruneFailedSyncNotSeen: a Prune whose commit of the file fails at
// its final fdatasync has written its pages and its meta page, and
// bbolt's memory map shows them: the pruned records looked gone although
// the disk may not hold their deletion (a restart could bring them back);
// meanwhile a Create of one of their keys journaled a new record, and
// every later commit of the file built on pages that may not be on disk.
// (Seen with strace failing the meta page's fdatasync with EIO: Prune
// returned an error, then Get said ErrNotFound, Create succeeded, and
// Close wrote two more pages and a meta page over the pages the prune had
// freed.)
//
// Once a commit fails after bbolt wrote it, the Store answers nothing
// from the file and writes nothing more to it, until it is reopened.
func TestPruneFailedSyncNotSeen(t *testing.T) {
	ctx := context.Background()
	s, path := rvOpen(t, withApplyDelay(time.Hour))
	for i := range 3 {
		_, err := s.Create(ctx, settledRecord(fmt.Sprint("old", i)))
		require.NoError(t, err)
	}
	_, err := s.Create(ctx, rvRecord("open", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.Checkpoint(ctx))

	written := true
	failFileCommits(s, &written)
	_, err = s.Prune(ctx, rvT0.Add(time.Hour))
	require.ErrorIs(t, err, syscall.EIO, "Prune()")
	require.ErrorIs(t, err, ErrMaybeCommitted, "Prune(): its deletions may be on disk or not")

	_, err = s.Get(ctx, "s", "old0")
	require.Error(t, err, "Get() of a record the failed Prune deleted")
	require.NotErrorIs(t, err, ErrNotFound, "Get() of a record the failed Prune deleted")
	_, err = s.Create(ctx, settledRecord("old1"))
	require.Error(t, err, "Create() of a key the failed Prune deleted")
	require.NotErrorIs(t, err, ErrMaybeCommitted, "Create(): nothing may be written")
	_, err = s.Update(ctx, "s", "open", func(r *Record) error { r.Review = "x"; return nil })
	require.Error(t, err, "Update() after the failed Prune")
	recs, err := s.List(ctx, Filter{})
	require.Error(t, err, "List() after the failed Prune: %d records", len(recs))
	_, err = s.Stats(ctx)
	require.Error(t, err, "Stats() after the failed Prune")
	_, err = s.Prune(ctx, rvT0.Add(time.Hour))
	require.Error(t, err, "Prune() again")
	require.NotErrorIs(t, err, ErrMaybeCommitted, "Prune() again: nothing may be written")
	require.Error(t, s.Close(), "Close() of a Store whose file failed a commit")

	// Reopened, the journal is whole, whichever of the two states the
	// file holds, and takes writes again.
	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	recs, err = s.List(ctx, Filter{})
	require.NoError(t, err)
	require.Contains(t, []int{1, 4}, len(recs), "records after the reopen: the Prune whole or not at all")
	require.NoError(t, s.viewChecked())
	_, err = s.Create(ctx, rvRecord("new", rvT0))
	require.NoError(t, err)
}

// TestApplyFailedCommit: the same for the applier's copy of the log into
// the file, and the other way a commit can fail. Failed once written (its
// fsync), it ends the Store's use of the file; failed before (a full
// disk), it leaves the file as it was, and the Store goes on, its writes
// safe in the log until the file takes them. Either way nothing
// acknowledged is lost: the log keeps what the failed commit held, and
// the next Open applies it.
func TestApplyFailedCommit(t *testing.T) {
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			ctx := context.Background()
			s, path := rvOpen(t, withApplyDelay(time.Hour))
			_, err := s.Create(ctx, rvRecord("a", rvT0))
			require.NoError(t, err)

			failFileCommits(s, &written)
			err = s.Checkpoint(ctx)
			require.ErrorIs(t, err, syscall.EIO, "Checkpoint()")
			require.Equal(t, written, errors.Is(err, ErrMaybeCommitted), "Checkpoint() matches ErrMaybeCommitted: %v", err)
			_, err = s.Create(ctx, rvRecord("b", rvT0))
			require.Equal(t, written, err != nil, "Create() after the failed apply fails: %v", err)
			require.NotErrorIs(t, err, ErrMaybeCommitted, "Create() after the failed apply")
			_, err = s.Get(ctx, "s", "a")
			require.Equal(t, written, err != nil, "Get() after the failed apply fails: %v", err)

			failFileCommits(s, nil)
			require.Equal(t, written, s.Checkpoint(ctx) != nil, "Checkpoint() once the file could take it fails")
			require.Equal(t, written, s.Close() != nil, "Close() fails")

			s, err = Open(path)
			require.NoError(t, err)
			defer s.Close()
			recs, err := s.List(ctx, Filter{})
			require.NoError(t, err)
			want := []string{"a", "b"}
			if written {
				want = want[:1] // b was refused
			}
			var keys []string
			for _, r := range recs {
				keys = append(keys, r.Key)
			}
			require.Equal(t, want, keys, "records after the reopen")
			require.NoError(t, s.viewChecked())
		})
	}
}

// TestBackPressureFailedCommitNotMaybe: a round that finds the overlay
// over its bound first copies it into the file itself (backPressure). When
// that commit fails at its fdatasync (EIO), the writes it copied, earlier
// ones and acknowledged, may be in the file or not, but nothing of the
// round was written: its writers get an error matching ErrFileFailed, not
// ErrMaybeCommitted, which the client turns into ErrUnknownOutcome ("the
// journal may hold the operation, and Run may send it") for an operation
// that is surely not journaled. After a reopen the round's record is not
// there, and the acknowledged ones are.
func TestBackPressureFailedCommitNotMaybe(t *testing.T) {
	ctx := context.Background()
	const bound = 64 << 10
	s, path := rvOpen(t, withApplyDelay(time.Hour), withOverlayMax(bound))
	big := make([]byte, 16<<10)
	const acked = 4 // just past the overlay's bound: the next round copies it first
	for i := range acked {
		r := rvRecord(fmt.Sprint("k", i), rvT0)
		r.Body, r.BodySHA = big, sha256.Sum256(big)
		_, err := s.Create(ctx, r)
		require.NoError(t, err, "k%d", i)
	}
	rounds := s.c.rounds.Load()
	written := true
	failFileCommits(s, &written)
	_, err := s.Create(ctx, rvRecord("late", rvT0))
	require.Equal(t, rounds+1, s.c.rounds.Load(), "rounds")
	require.ErrorIs(t, err, syscall.EIO, "Create() whose round's copy of the overlay failed")
	require.ErrorIs(t, err, ErrFileFailed, "Create() whose round's copy of the overlay failed")
	require.NotErrorIs(t, err, ErrMaybeCommitted, "Create() whose round wrote nothing")
	failFileCommits(s, nil)
	require.Error(t, s.Close(), "Close() of a Store whose file failed a commit")

	s, err = Open(path)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "late")
	require.ErrorIs(t, err, ErrNotFound, "the refused record after a reopen")
	for i := range acked {
		_, err := s.Get(ctx, "s", fmt.Sprint("k", i))
		require.NoError(t, err, "k%d after a reopen", i)
	}
	require.NoError(t, s.viewChecked())
}
