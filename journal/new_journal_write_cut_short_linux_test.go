//go:build linux

package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewJournalWriteCutShortLeavesNoMarker: where fallocate(2) cannot
// reserve a new journal's first pages (a seccomp filter's EPERM, a file
// system without it), bbolt writes them itself (DB.init), and on a full
// disk write(2) fails with ENOSPC before any fdatasync. Its pages stay
// dirty, or were never written: nothing the disk did not take is shown
// from memory, and the marker of a failed write, which says just that,
// must not be left (write_failed.go: a write cut short leaves none).
// Open took every system call's error of bolt.Open for a failed sync:
// it left the marker, so Inspect and every read-only Open of the journal
// then warned of a failed write, its error said to check the disk
// rather than the space, and, where the full disk refused the marker
// too, it told the operator not to open the journal again before a
// reboot. A small tmpfs is the full disk.
func TestNewJournalWriteCutShortLeavesNoMarker(t *testing.T) {
	for _, tc := range []struct {
		free   int64 // pages
		inodes bool  // out of inodes too, but the journal's
	}{{0, false}, {2, false}, {0, true}} {
		name := strconv.FormatInt(tc.free, 10) + " pages free"
		if tc.inodes {
			name += ", no inode for a marker"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fullTmpfs(t, dir, "nr_inodes=64", tc.free)
			if tc.inodes {
				fillInodes(t, dir)
			}

			path := filepath.Join(dir, "j.db")
			_, err := Open(path, withFallocate(func(int, uint32, int64, int64) error {
				return syscall.EPERM // denied: bbolt writes as before
			}))
			require.ErrorIs(t, err, syscall.ENOSPC, "the fixture: bbolt's write of the first pages cut short")
			require.NotErrorIs(t, err, ErrFileFailed)
			require.NotContains(t, err.Error(), "rebooted", "what to do")
			_, err = os.Lstat(path + writeFailedSuffix)
			require.True(t, errors.Is(err, os.ErrNotExist), "the marker of a failed write, where no sync failed: %v", err)
		})
	}
}

// fillInodes creates empty files in dir until its file system has no
// inode left, then removes one: room for the journal's file alone.
func fillInodes(t *testing.T, dir string) {
	t.Helper()
	for i := range 1 << 16 {
		f, err := os.Create(filepath.Join(dir, "inode"+strconv.Itoa(i)))
		if err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling inodes: %v", err)
			require.NotZero(t, i, "the fixture: no inode for the journal")
			require.NoError(t, os.Remove(filepath.Join(dir, "inode0")))
			return
		}
		require.NoError(t, f.Close())
	}
	t.Fatal("the fixture: the inodes never ran out")
}
