//go:build linux

package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMarkerUnwritableSaysSo: a commit of the file whose fdatasync failed
// leaves the marker that makes the next Open write the journal again
// before trusting it. On a disk that is full as well (here: out of
// inodes, as a full file system refuses a new file), the marker could
// not be created, and nothing said so: the Store failed as usual, and the
// next Open in the same boot read the unsynced commit back as durable.
// The failure now says that the marker is missing and what the operator
// must do instead.
func TestMarkerUnwritableSaysSo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mountOrSkip(t, "tmpfs", dir, "tmpfs", 0, "size=8m,nr_inodes=16,mode=0700")
	path := filepath.Join(dir, "j.db")
	s, err := Open(path, withApplyDelay(time.Hour), withFailCommit(func(written bool) error {
		if !written {
			return nil
		}
		// The disk fills up as the fdatasync fails.
		for i := range 64 {
			f, err := os.Create(filepath.Join(dir, "fill"+strconv.Itoa(i)))
			if err != nil {
				break
			}
			_ = f.Close()
		}
		return syscall.EIO
	}))
	require.NoError(t, err)
	// The Store's first write commits to the file first (dependOnLog).
	_, err = s.Create(ctx, rvRecord("k", rvT0))
	require.ErrorIs(t, err, ErrFileFailed)
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, err.Error(), "j.db.write-failed could not be written", "the marker missing")
	require.Contains(t, err.Error(), "do not open the journal again before the machine is rebooted", "what to do")
	// drop_caches (invalidate_mapping_pages) "will not invalidate pages
	// which are dirty, locked, under writeback or mapped into pagetables"
	// (https://www.systutorials.com/linux-manual-page-9-invalidate_mapping_pages/),
	// and bbolt maps the journal until its Store is closed: caches
	// dropped while the process that failed runs keep the failed pages.
	require.Contains(t, err.Error(), "once every process that had the journal open has stopped", "when dropping the cache helps")
	err = s.Checkpoint(ctx)
	require.ErrorIs(t, err, ErrFileFailed)
	require.Contains(t, err.Error(), "could not be written", "every later call says it")
	_, err = os.Stat(path + writeFailedSuffix)
	require.True(t, errors.Is(err, os.ErrNotExist), "the fixture: no marker")
	_ = s.Close()
}
