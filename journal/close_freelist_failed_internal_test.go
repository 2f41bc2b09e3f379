package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// withFailFreelist sets failFreelist: fail stands in for the fdatasync
// of Close's commit of the freelist.
func withFailFreelist(fail func() error) Option {
	return optionFunc(func(c *config) { c.failFreelist = fail })
}

// On a journal with many free pages, commits skip the freelist
// (tuneFreelist), and Close, once the log is deleted, writes it with a
// commit of its own (syncFreelist): a new meta page naming a new freelist
// page. That commit was bbolt's bare Update: when its fdatasync failed
// (the kernel marking the pages clean though the disk lacks them, see
// writeFailedSuffix), it left no marker, and Close said "the journal is
// intact". The next Open, in the same boot, read that meta page and
// freelist from memory and built on them; a reboot later the file's newest
// meta page may name a freelist page the disk never held, whose free pages
// are pages in use, for later commits to overwrite. It now leaves the
// marker, and says so, and the next Open writes the journal again and
// syncs it before it trusts it.
func TestCloseFreelistCommitFailedLeavesMarker(t *testing.T) {
	s, path := openFreelistFailing(t)
	err := s.Close()
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, err, ErrFileFailed, "a commit written but not synced")
	require.NotContains(t, err.Error(), "intact")
	require.Contains(t, err.Error(), "open the journal again", "what to do")
	_, err = os.Stat(path + writeFailedSuffix)
	require.NoError(t, err, "the marker of the failed write")
	require.Empty(t, segmentsOf(t, path), "the fixture: the log deleted before the freelist's commit")

	requireRewrittenHolds(t, path, "k0")
}

// manyFreePages makes a journal at path with more than
// freelistUnsyncAbove free pages, as pruning many records leaves it (a
// bucket of one-page values, deleted), quicker than pruning them.
func manyFreePages(t *testing.T, path string) {
	t.Helper()
	s, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	value := []byte(strings.Repeat("x", db.Info().PageSize-256))
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("scratch"))
		if err != nil {
			return err
		}
		for i := range freelistUnsyncAbove + 200 {
			if err := b.Put(fmt.Appendf(nil, "%06d", i), value); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("scratch")) }))
	require.NoError(t, db.Close())
}

// A Close whose copy of the log failed before anything was written (a
// full disk: the Store stays usable, the log kept for the next Open)
// still commits the freelist (syncFreelist). When that commit failed once
// written, it left the marker, but Close returned only the copy's error:
// the caller was not told of a commit that may be missing from the disk,
// nor, had the marker not been written, that the journal must not be
// opened again before a reboot. Close now returns both.
func TestCloseFreelistCommitFailedAfterFailedCopyIsReported(t *testing.T) {
	ctx := context.Background()
	s, path := openFreelistFailing(t)
	_, err := s.Create(ctx, rvRecord("k1", rvT0))
	require.NoError(t, err)
	s.ap.mu.Lock()
	s.ap.failCommit = func(written bool) error {
		if !written {
			return syscall.ENOSPC // before anything is written
		}
		return nil
	}
	s.ap.mu.Unlock()
	err = s.Close()
	require.ErrorIs(t, err, syscall.ENOSPC, "the copy's failure")
	require.ErrorIs(t, err, ErrFileFailed, "the freelist's commit, written but not synced")
	require.ErrorIs(t, err, syscall.EIO)
	_, err = os.Stat(path + writeFailedSuffix)
	require.NoError(t, err, "the marker of the failed write")
	require.NotEmpty(t, segmentsOf(t, path), "the log kept for the next Open")

	requireRewrittenHolds(t, path, "k0", "k1")
}

// openFreelistFailing opens a journal with many free pages (manyFreePages),
// whose commits skip the freelist, holding record k0 in its file, and
// whose Close's commit of the freelist fails with EIO once written.
func openFreelistFailing(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	manyFreePages(t, path)
	s, err := Open(path, withFailFreelist(func() error { return syscall.EIO }))
	require.NoError(t, err)
	_, err = s.Create(context.Background(), rvRecord("k0", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.flush(), "a commit of the file")
	require.True(t, s.db.NoFreelistSync, "the fixture: commits skip the freelist")
	return s, path
}

// requireRewrittenHolds opens the journal at path, which a failed write
// left marked, for writing (it is written again) then read-only, and
// requires it to hold keys and to pass Check.
func requireRewrittenHolds(t *testing.T, path string, keys ...string) {
	t.Helper()
	requireWrittenAgain(t, path, nil)
	r, err := Open(path, ReadOnly())
	require.NoError(t, err)
	for _, k := range keys {
		_, err = r.Get(context.Background(), "s", k)
		require.NoError(t, err, k)
	}
	require.NoError(t, r.Close())
	require.NoError(t, Check(path))
}

// A Close whose commit of the freelist failed once written (its marker
// left), and whose closing of the file then failed too (close(2) reports
// a write-back error on some file systems; here its descriptor is closed
// under it), returned only the close's error: the caller was not told of
// a commit the disk may not hold (ErrFileFailed), nor, had the marker not
// been written, not to open the journal again before a reboot. Close now
// returns both.
func TestCloseFreelistCommitFailedThenCloseFailedIsReported(t *testing.T) {
	s, path := openFreelistFailing(t)
	s.ap.mu.Lock()
	s.ap.failFreelist = func() error {
		// bbolt's Close then fails to unlock and to close the file.
		require.NoError(t, s.file.Close())
		return syscall.EIO
	}
	s.ap.mu.Unlock()
	err := s.Close()
	require.ErrorIs(t, err, syscall.EBADF, "the close's failure (bbolt unlocking the file)")
	require.ErrorIs(t, err, ErrFileFailed, "the freelist's commit, written but not synced")
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, err.Error(), "open the journal again", "what to do")
	require.Equal(t, 1, strings.Count(err.Error(), "journal: "), "%q names the package once", err)
	require.True(t, strings.HasPrefix(err.Error(), "journal: close: "), err.Error())
	_, err = os.Stat(path + writeFailedSuffix)
	require.NoError(t, err, "the marker of the failed write")

	requireRewrittenHolds(t, path, "k0")
}
