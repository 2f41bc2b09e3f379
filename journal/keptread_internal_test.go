package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// keptState returns the kept transaction's state under its lock.
func keptState(k *keptRead) (open bool, suspended int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tx != nil, k.suspended
}

// fileHoldingA opens a journal, fsync off, whose file holds record "a"
// (and the overlay nothing).
func fileHoldingA(t *testing.T) (*Store, context.Context) {
	s, _ := rvOpen(t, WithUnsafeNoSync())
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("a", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.Checkpoint(ctx))
	return s, ctx
}

// noStall requires what done delivers to be nil, and to come within a
// minute: a kept read transaction left open through a commit that grows
// the file stalls that commit for ever (what stalls: what).
func noStall(t *testing.T, done <-chan error, what string) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-deadline.C:
		t.Fatal(what + " stalled: a kept read transaction blocks the file's growth")
	}
}

// TestKeptReadAfterFailedCommit: a bbolt write that fails (its function's
// error, or a panic in it) must leave the kept transaction as a commit
// does: ended before the write, suspended no more after it. Were the
// resume skipped, rounds would never keep a transaction again; were the
// suspend undone twice, one would be kept through the next write, which
// then waits for ever for bbolt's mmap lock once the file grows.
func TestKeptReadAfterFailedCommit(t *testing.T) {
	s, ctx := fileHoldingA(t)
	_, err := s.Create(ctx, rvRecord("b", rvT0)) // misses the overlay: keeps a read
	require.NoError(t, err)
	open, _ := keptState(&s.kept)
	require.True(t, open, "no transaction kept after a Create that read the file")

	failures := map[string]func(*bolt.Tx) error{
		"error": func(*bolt.Tx) error { return errInjected },
		"panic": func(*bolt.Tx) error { panic(errInjected) },
	}
	for name, fn := range failures {
		err := func() (err error) {
			s.ap.mu.Lock()
			defer s.ap.mu.Unlock()
			defer func() {
				if p := recover(); p != nil {
					err = p.(error)
				}
			}()
			return s.commitBolt(fn)
		}()
		require.ErrorIs(t, err, errInjected, "%s: commitBolt()", name)
		open, suspended := keptState(&s.kept)
		require.False(t, open, "%s: the kept transaction outlived a write", name)
		require.Zero(t, suspended, "%s: suspensions left after the write", name)

		_, err = s.Create(ctx, rvRecord("a", rvT0))
		require.ErrorIs(t, err, ErrExists, "%s: Create() of a record only the file holds", name)
		open, _ = keptState(&s.kept)
		require.True(t, open, "%s: no transaction kept after the failed write", name)
	}

	// Grow the file well past its first memory map while rounds keep
	// reads: every apply must end the kept transaction first.
	done := make(chan error, 1)
	go func() {
		for i := range 40 {
			for j := range 50 {
				if _, err := s.Create(ctx, rvRecord(fmt.Sprintf("g%02d-%02d", i, j), rvT0)); err != nil {
					done <- err
					return
				}
			}
			if err := s.Checkpoint(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	noStall(t, done, "writes")
}

// TestKeptReadWhileWriteRuns: the rounds that run while the applier's
// write builds its transaction keep one read of the file for their
// Creates, as between writes, instead of beginning one each (about four
// times the CPU of a kept lookup); and the kept read ends before the
// write commits, so that a commit that grows the file, which maps it
// afresh under bbolt's mmap lock, does not wait for it for ever.
func TestKeptReadWhileWriteRuns(t *testing.T) {
	s, ctx := fileHoldingA(t)
	grow := []byte("test grows the file")
	done := make(chan error, 1)
	reads := -1
	go func() {
		s.ap.mu.Lock()
		defer s.ap.mu.Unlock()
		done <- s.commitBolt(func(tx *bolt.Tx) error {
			before := s.db.Stats().TxN
			for i := range 3 {
				if _, err := s.Create(ctx, rvRecord(fmt.Sprintf("during-%d", i), rvT0)); err != nil {
					return err
				}
			}
			reads = s.db.Stats().TxN - before
			// A value larger than the file's memory map: the commit maps
			// the grown file afresh.
			return tx.Bucket(bucketMeta).Put(grow, make([]byte, 64<<20))
		})
	}()
	noStall(t, done, "the write's commit")
	require.Equal(t, 1, reads, "read transactions begun for three Creates during the write")
	open, suspended := keptState(&s.kept)
	require.False(t, open, "the kept transaction outlived the write")
	require.Zero(t, suspended, "suspensions left after the write")
	s.ap.mu.Lock()
	require.NoError(t, s.commitBolt(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(grow) }))
	s.ap.mu.Unlock()
}
