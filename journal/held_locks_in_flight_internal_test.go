package journal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A bbolt Begin that panics on damaged meta pages keeps bbolt's meta lock
// (and a read lock on its memory map) for good: the Store stops calling
// bbolt (stopUsing). But calls already inside bbolt at that moment went on
// into it: a scan whose read transaction was open waited for the meta
// lock to end that transaction, and the applier's commit under way waited
// for it to write its meta page (or for the map's lock to grow the file),
// both for ever; Close then waited for the applier, and Checkpoint with
// it. Modelled on a bad sector or a stray write through another
// descriptor under a journal that is being read and copied into: nothing
// a server does. Every call must come back with the Store's ErrCorrupt
// instead, and Close must return.

// TestHeldLocksEndReadUnderWay: a read of the file (a List, a Stats, a
// ForEachOpen page) is under way when another call's Begin meets both
// meta pages damaged. The read returned nothing, ever.
func TestHeldLocksEndReadUnderWay(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s := openCopiedA(t, path)

	inside, release := make(chan struct{}), make(chan struct{})
	read := make(chan error, 1)
	go func() {
		read <- s.view(ctx, func(tx *bolt.Tx) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	damageMetaPage(t, path, 0)
	damageMetaPage(t, path, 1)
	within(t, "Stats", func() {
		_, err := s.Stats(ctx)
		assert.ErrorIs(t, err, ErrCorrupt)
	})
	require.True(t, s.held.Load(), "the fixture: bbolt's locks are held")
	close(release)

	within(t, "the read under way", func() {
		err := <-read
		assert.ErrorIs(t, err, ErrCorrupt, "the file is known damaged: the read fails closed")
		assert.Contains(t, err.Error(), "idem check", "what to do")
	})
	within(t, "Close", func() {
		assert.ErrorIs(t, s.Close(), ErrCorrupt)
	})
	// Nothing was lost: with the meta pages mended the journal opens
	// with the acknowledged write.
	damageMetaPage(t, path, 0)
	damageMetaPage(t, path, 1)
	requireRecords(t, path, "meta pages mended", "a")
}

// TestHeldLocksEndCommitUnderWay: the applier is copying the log into the
// file, its transaction's pages built, when a Get's Begin meets both meta
// pages damaged; meanwhile writers go on. The applier's commit waited for
// the meta lock for ever, and Checkpoint and Close with it.
func TestHeldLocksEndCommitUnderWay(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	var once sync.Once
	var armed atomic.Bool // the Checkpoint's copy of "b", not the rounds' own commits
	inside, release := make(chan struct{}), make(chan struct{})
	s := openCopiedA(t, path, withFailCommit(func(written bool) error {
		if !written && armed.Load() {
			once.Do(func() {
				close(inside)
				<-release
			})
		}
		return nil
	}))
	_, err := s.Create(ctx, newRecord("b"))
	require.NoError(t, err)

	armed.Store(true)
	checkpoint := make(chan error, 1)
	go func() { checkpoint <- s.Checkpoint(ctx) }()
	<-inside // the applier's write transaction holds the copy of "b"
	damageMetaPage(t, path, 0)
	damageMetaPage(t, path, 1)
	within(t, "Get", func() {
		_, err := s.Get(ctx, "s", "a") // copied: read from the file
		assert.ErrorIs(t, err, ErrCorrupt)
	})
	require.True(t, s.held.Load(), "the fixture: bbolt's locks are held")

	// Writers meanwhile: each fails at once, none is journaled.
	const writers = 8
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			_, err := s.Create(ctx, newRecord(fmt.Sprintf("w%d", i)))
			errs <- err
		}()
	}
	within(t, "the writers", func() {
		for range writers {
			assert.ErrorIs(t, <-errs, ErrCorrupt)
		}
	})
	close(release)

	within(t, "the Checkpoint under way", func() {
		err := <-checkpoint
		assert.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), "idem check", "what to do")
	})
	within(t, "Close", func() {
		err := s.Close()
		assert.ErrorIs(t, err, ErrCorrupt)
		assert.False(t, errors.Is(err, ErrClosed), "%v", err)
	})
	// Nothing was lost: "b" was acknowledged from the log, which Close
	// left whole; no writer's record was journaled.
	damageMetaPage(t, path, 0)
	damageMetaPage(t, path, 1)
	requireRecords(t, path, "meta pages mended", "a", "b")
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	for i := range writers {
		_, err := r.Get(ctx, "s", fmt.Sprintf("w%d", i))
		assert.ErrorIs(t, err, ErrNotFound, "writer %d failed: nothing journaled", i)
	}
}

// openCopiedA opens a journal at path whose applier waits (only the
// test's calls touch the file), with opts, and writes record "a" into its
// file.
func openCopiedA(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, append([]Option{withApplyDelay(time.Hour)}, opts...)...)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), newRecord("a"))
	require.NoError(t, err)
	require.NoError(t, s.Checkpoint(context.Background()))
	return s
}
