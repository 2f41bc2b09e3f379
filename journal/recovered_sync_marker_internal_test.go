package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Open makes the log it read back durable (syncRecovered), and leaves
// the marker of a failed write when an fdatasync fails: the kernel may
// have marked the pages clean though the disk lacks them. A segment that
// could not even be opened (EMFILE, EACCES, or gone from under it, as
// here: the first segment's sync moves the second away) had no fdatasync
// fail, yet left the marker too: the next Open wrote the whole journal
// file and every segment again, and a read-only Open or Inspect warned of
// a failed write that never was. The next Open now just syncs the
// segments it reads back.
func TestRecoveredSegmentUnopenableLeavesNoMarker(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour), withOverlayMax(2<<10))
	require.NoError(t, err)
	for i := 0; len(segmentsOf(t, path)) < 2; i++ {
		require.Less(t, i, 100, "no second segment")
		_, err := s.Create(ctx, rvRecord(fmt.Sprint("k", i), rvT0))
		require.NoError(t, err)
	}
	s.crash(t)
	segs := segmentsOf(t, path)
	require.Len(t, segs, 2)
	moved := segs[1] + ".moved"

	_, err = Open(path, withFailSync(func(p string) error {
		if p == segs[0] {
			return os.Rename(segs[1], moved)
		}
		return nil
	}))
	require.ErrorIs(t, err, os.ErrNotExist, "Open over a segment it cannot open")
	require.NotContains(t, err.Error(), "marker", "no marker to speak of")
	_, err = os.Stat(path + writeFailedSuffix)
	require.ErrorIs(t, err, os.ErrNotExist, "the marker of a failed write, though no write failed")

	require.NoError(t, os.Rename(moved, segs[1]))
	s, synced := openSyncing(t, path, withApplyDelay(time.Hour))
	require.Equal(t, segs, *synced, "files synced by Open: the segments read back, nothing written again")
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
