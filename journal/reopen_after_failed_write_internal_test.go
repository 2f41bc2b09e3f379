package journal

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fsyncgate (PostgreSQL, 2018; fsync(2), "writeback errors"): after a
// failed fsync Linux marks the pages it could not write clean, reports the
// error once, to the descriptors open then, and serves the pages from
// memory. A Store whose applier commit failed once written stopped using
// the file (ErrFileFailed, "until the journal is closed and opened
// again"), and the application, told so, restarted: the next Open, same
// boot, read the failed commit from memory as if on disk, its fsyncs
// succeeding with nothing dirty. It took the commit's applied position,
// skipped the log entries below it and deleted their segments after its
// first apply; a reboot or an eviction later, the records the commit held
// were gone from the file, with no log left to restore them from: orders
// journaled, perhaps sent, never resumed. The failing Store now leaves a
// marker, and the next Open writes the file and its log again and syncs
// them before it uses them: with the disk still failing, it refuses; once
// the disk takes them, it opens and the marker is gone.
func TestReopenAfterFailedCommitWritesTheJournalAgain(t *testing.T) {
	ctx := context.Background()
	path := failedCommitJournal(t)
	segs := segmentsOf(t, path)
	require.NotEmpty(t, segs, "the log, left whole")

	// The disk still fails: what memory shows is not made out to be on
	// disk.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = Open(path, withFailSync(func(p string) error {
		if p == path {
			return syscall.EIO
		}
		return nil
	}))
	require.ErrorIs(t, err, syscall.EIO, "Open over a file whose last commit failed, the disk still failing")
	require.Contains(t, err.Error(), "check the disk")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the refused journal's bytes")
	require.Equal(t, segs, segmentsOf(t, path), "the refused journal's log")

	// The disk takes them: the file and every segment written again and
	// synced, then used.
	requireWrittenAgain(t, path, segs)
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// A journal that met no failure is not written again.
	s, synced := openSyncing(t, path)
	require.Empty(t, *synced)
	require.NoError(t, s.Close())
}

// failedCommitJournal returns the path of a journal holding k0 whose
// applier's commit was written, then failed its fdatasync (EIO), and
// which was then closed: the marker of a failed write beside it.
func failedCommitJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	_, err = s.Create(context.Background(), rvRecord("k0", rvT0))
	require.NoError(t, err)
	s.ap.mu.Lock()
	s.ap.failCommit = func(written bool) error {
		if written {
			return syscall.EIO
		}
		return nil
	}
	s.ap.mu.Unlock()
	require.ErrorIs(t, s.Checkpoint(context.Background()), ErrFileFailed)
	require.ErrorIs(t, s.Close(), ErrFileFailed)
	return path
}

// openSyncing opens the journal at path and returns the files its Open
// synced (withFailSync), in order.
func openSyncing(t *testing.T, path string, opts ...Option) (*Store, *[]string) {
	t.Helper()
	var synced []string
	s, err := Open(path, append(opts, withFailSync(func(p string) error {
		synced = append(synced, p)
		return nil
	}))...)
	require.NoError(t, err)
	return s, &synced
}

// requireWrittenAgain opens the journal at path, which a failed write
// marked, and requires that Open wrote again and synced the file and its
// log segments segs, and removed the marker.
func requireWrittenAgain(t *testing.T, path string, segs []string) {
	t.Helper()
	s, synced := openSyncing(t, path)
	require.NoError(t, s.Close())
	require.Subset(t, *synced, append([]string{path}, segs...), "files written again and synced")
	_, err := os.Stat(path + writeFailedSuffix)
	require.ErrorIs(t, err, os.ErrNotExist, "the marker, once the journal is on disk")
}

// The log's side of it: a round whose fdatasync failed and whose voiding
// segment could not be started (ErrMaybeCommitted) is in memory, perhaps
// not on disk, until a later round voids it; a process killed before then
// left it so. The next Open writes the log again before it reads the
// round back and builds on it.
func TestReopenAfterUnvoidedLogWriteWritesTheJournalAgain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	logFault{written: true, headers: 1}.install(s)
	_, err = s.Create(ctx, rvRecord("k", rvT0))
	require.ErrorIs(t, err, ErrMaybeCommitted)
	s.crash(t)
	segs := segmentsOf(t, path)

	_, err = Open(path, withFailSync(func(p string) error {
		if p == segs[0] {
			return syscall.EIO
		}
		return nil
	}))
	require.ErrorIs(t, err, syscall.EIO, "Open over a log whose write failed, the disk still failing")
	require.Contains(t, err.Error(), "check the disk")

	requireWrittenAgain(t, path, segs)
}
