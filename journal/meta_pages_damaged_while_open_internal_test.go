package journal

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Both meta pages damaged under an open Store (a disk fault, a stray write
// through another descriptor): bbolt validated them when it mapped the
// file, and its Begin panics "invalid meta pages" while it holds its meta
// and mmap locks (a read) or its writer lock (a write). The panic was
// recovered, but the locks stayed held: the first call failed with
// ErrCorrupt, the next one waited for them for ever, and so did Close.
// A payment process that hangs holds its callers for ever and never
// reaches Resume; it must fail closed instead, every call at once.

// TestMetaPagesDamagedUnderOpenStoreFailClosed damages both meta pages of
// an open Store's file, once with everything copied into the file (the
// next call's read begins the failing transaction) and once with a write
// in the log only (the next call copies it, in a write transaction).
func TestMetaPagesDamagedUnderOpenStoreFailClosed(t *testing.T) {
	for _, pending := range []bool{false, true} {
		name := "read"
		if pending {
			name = "write"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "j.db")
			// The applier waits: only the calls below touch the file.
			s, err := Open(path, withApplyDelay(time.Hour))
			require.NoError(t, err)
			_, err = s.Create(ctx, newRecord("a"))
			require.NoError(t, err)
			require.NoError(t, s.Checkpoint(ctx))
			if pending {
				_, err = s.Create(ctx, newRecord("b"))
				require.NoError(t, err)
			}
			damageMetaPage(t, path, 0)
			damageMetaPage(t, path, 1)

			for i := range 2 {
				within(t, "Stats", func() {
					_, err := s.Stats(ctx)
					assert.ErrorIs(t, err, ErrCorrupt, "Stats %d", i+1)
					assert.Contains(t, err.Error(), "idem check", "what to do")
				})
			}
			within(t, "Get", func() {
				_, err := s.Get(ctx, "s", "a")
				assert.ErrorIs(t, err, ErrCorrupt)
			})
			within(t, "Create", func() {
				_, err := s.Create(ctx, newRecord("c"))
				assert.ErrorIs(t, err, ErrCorrupt, "nothing may be journaled, so nothing sent")
			})
			within(t, "Update", func() {
				_, err := s.Update(ctx, "s", "a", func(*Record) error { return nil })
				assert.ErrorIs(t, err, ErrCorrupt)
			})
			within(t, "Close", func() {
				err := s.Close()
				t.Logf("Close: %v", err)
				assert.ErrorIs(t, err, ErrCorrupt)
				assert.Contains(t, err.Error(), "idem check", "what to do")
			})
			// The file's lock is released: the next Open reads the file
			// and calls it damaged, rather than waiting for this process.
			within(t, "Open again", func() {
				_, err := Open(path, WithLockTimeout(time.Second))
				assert.ErrorIs(t, err, ErrCorrupt)
				assert.NotErrorIs(t, err, ErrLocked)
			})
			// Nothing was lost: with the meta pages as they were, the
			// journal opens with every acknowledged write, the one only
			// the log held included (Close left the log whole).
			damageMetaPage(t, path, 0)
			damageMetaPage(t, path, 1)
			keys := []string{"a"}
			if pending {
				keys = append(keys, "b")
			}
			requireRecords(t, path, "meta pages mended", keys...)
		})
	}
}

// within runs call and fails the test if it has not returned in ten
// seconds: a call that waits for bbolt's locks for ever fails the test
// rather than hanging the run.
func within(t *testing.T, what string, call func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	// A minute, not seconds: what this catches never returns at all, while
	// a healthy call under a loaded CI runner (40 fsync'd checkpoints of
	// 256 KiB, say, beside the other modules' tests) took 8 s of 10 once
	// and failed another run.
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return in a minute: it waits for locks a bbolt panic left held", what)
	}
}

// TestCloseFreelistCommitFailedOnDamagedMetaPagesMatchesFileFailed: Close's
// commit of the free-page list fails once written (its fdatasync), and
// reading whether the file shows it finds both meta pages damaged, bbolt's
// Begin panicking with its locks held. The commit may be on the disk or
// not: the marker is left, and Close's error must say so as Close's doc
// promises (ErrFileFailed), besides ErrCorrupt; it said only ErrCorrupt,
// the stop that bbolt's locks forced having taken the failure's words in
// as text.
func TestCloseFreelistCommitFailedOnDamagedMetaPagesMatchesFileFailed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	manyFreePages(t, path)
	s, err := Open(path, withFailFreelist(func() error {
		damageMetaPage(t, path, 0)
		damageMetaPage(t, path, 1)
		return syscall.EIO
	}))
	require.NoError(t, err)
	_, err = s.Create(context.Background(), rvRecord("k0", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.flush(), "a commit of the file")
	require.True(t, s.db.NoFreelistSync, "the fixture: commits skip the freelist")

	within(t, "Close", func() {
		err := s.Close()
		assert.ErrorIs(t, err, ErrFileFailed, "a commit written but not synced")
		assert.ErrorIs(t, err, ErrCorrupt)
		assert.ErrorIs(t, err, syscall.EIO)
		assert.Contains(t, err.Error(), "idem check", "what to do")
	})
	_, err = os.Stat(path + writeFailedSuffix)
	require.NoError(t, err, "the marker of the failed write")
}
