package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// editMeta runs fn on the meta bucket of the journal file at path, as
// another build of idem would write it.
func editMeta(t *testing.T, path string, fn func(meta *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketMeta)) }))
	require.NoError(t, db.Close())
}

// A file that names no log it depends on opens as before the field: one
// written by an earlier release (killed, its log beside it, or with the
// log gone: there is nothing to tell the two apart by, as before), and one
// whose field an earlier release left behind after it applied the log and
// deleted it on a clean Close (metaLogDep names the applied position of
// its own commit, which no longer matches).
func TestLogDependencyOfEarlierReleases(t *testing.T) {
	ctx := context.Background()
	t.Run("no field, log in place", func(t *testing.T) {
		path := crashedJournal(t, createKeys(t, 3))
		editMeta(t, path, func(meta *bolt.Bucket) error { return meta.Delete(metaLogDep) })
		s, err := Open(path)
		require.NoError(t, err)
		for _, k := range []string{"k0", "k1", "k2"} {
			_, err := s.Get(ctx, "s", k)
			require.NoError(t, err, k)
		}
		require.NoError(t, s.Close())
	})
	t.Run("no field, log gone", func(t *testing.T) {
		path := crashedJournal(t, createKeys(t, 3))
		editMeta(t, path, func(meta *bolt.Bucket) error { return meta.Delete(metaLogDep) })
		for _, seg := range segmentsOf(t, path) {
			require.NoError(t, os.Remove(seg))
		}
		s, err := Open(path)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})
	t.Run("field left by this release, log applied by an earlier one", func(t *testing.T) {
		path := crashedJournal(t, createKeys(t, 3))
		var left []byte
		editMeta(t, path, func(meta *bolt.Bucket) error {
			left = append([]byte(nil), meta.Get(metaLogDep)...)
			return nil
		})
		require.Len(t, left, 16, "the killed Store recorded its log")
		// The earlier release applies the log and deletes it on Close,
		// leaving the field as it found it.
		s, err := Open(path)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.Empty(t, segmentsOf(t, path))
		editMeta(t, path, func(meta *bolt.Bucket) error { return meta.Put(metaLogDep, left) })
		s, err = Open(path)
		require.NoError(t, err, "a stale dependency")
		for _, k := range []string{"k0", "k1", "k2"} {
			_, err := s.Get(ctx, "s", k)
			require.NoError(t, err, k)
		}
		require.NoError(t, s.Close())
	})
}

// backlogJournal returns the path of a journal killed with applyBatch+1
// writes in its log alone, the file naming the log's first segment.
func backlogJournal(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	return crashedJournal(t, func(s *Store) {
		_, err := s.Create(ctx, rvRecord("k0", rvT0)) // the file records its log
		require.NoError(t, err)
		written := false
		failFileCommits(s, &written) // ENOSPC-like: nothing reaches the file
		for i := 1; i < applyBatch+2; i++ {
			_, err := s.Create(ctx, rvRecord(fmt.Sprint("k", i), rvT0))
			require.NoError(t, err)
		}
	})
}

// killedAfterFirstPart opens the journal at path, lets its applier commit
// the first part of the backlog and fail the next, and kills the Store.
func killedAfterFirstPart(t *testing.T, path string) {
	t.Helper()
	var commits atomic.Int32
	second := make(chan struct{})
	s, err := Open(path, withApplyDelay(time.Hour), withFailCommit(func(written bool) error {
		if written {
			return nil
		}
		switch commits.Add(1) {
		case 1:
			return nil
		case 2:
			close(second)
		}
		return syscall.EIO // the second part, before anything is written
	}))
	require.NoError(t, err)
	// Waited for, not polled: a loop spinning beside the applier took
	// one of two CPUs from its first commit (16384 records, slow under
	// the race detector), which then missed a 10 s deadline on main.
	select {
	case <-second:
	case <-time.After(time.Minute):
		t.Fatal("the applier's second commit did not come within a minute")
	}
	s.crash(t)
}

// TestBacklogAppliedInPartsKeepsItsLogDependency: a journal reopened with
// more unapplied writes than one bbolt transaction takes (applyBatch: the
// file could not be written for a while, a full disk, while the log took
// the writes, and the process was then killed) is applied in several
// commits. The first recorded that the file depended on no log, although
// the writes of the later ones were in the log alone: a process killed
// between two of them (a liveness probe during the long start-up) left a
// file that Open, with the segments gone, took for a whole journal, the
// writes lost without a word.
func TestBacklogAppliedInPartsKeepsItsLogDependency(t *testing.T) {
	path := backlogJournal(t)
	killedAfterFirstPart(t, path)
	for _, seg := range segmentsOf(t, path) {
		require.NoError(t, os.Remove(seg))
	}
	_, err := Open(path)
	require.ErrorIs(t, err, ErrLogMissing, "the last writes were in the log alone")
}

// TestBacklogAppliedInPartsUnderAStaleDependency: a field an earlier
// release left stale (it applied the log and wrote its own segments,
// numbered from 1 again once none was left) says nothing; a part of the
// backlog applied under it must not make it say something again, or the
// next Open refuses a whole journal, its segments all there.
func TestBacklogAppliedInPartsUnderAStaleDependency(t *testing.T) {
	path := backlogJournal(t)
	editMeta(t, path, func(meta *bolt.Bucket) error {
		v := binary.BigEndian.AppendUint64(nil, 5) // a generation past the earlier release's
		return meta.Put(metaLogDep, binary.BigEndian.AppendUint64(v, 1<<40))
	})
	killedAfterFirstPart(t, path)
	s, err := Open(path)
	require.NoError(t, err, "the log is whole")
	for _, k := range []string{"k0", fmt.Sprint("k", applyBatch+1)} {
		_, err := s.Get(context.Background(), "s", k)
		require.NoError(t, err, k)
	}
	require.NoError(t, s.Close())
}
