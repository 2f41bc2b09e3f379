package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Compact may run as root (sudo idem compact) on a journal whose directory
// the application's user can write, and so plant names in. An Open for
// writing that finds the marker of a failed write writes the journal's log
// segments again (rewriteAfterFailure), and it opened every name that looks
// like a segment for writing, through symbolic links: a link planted
// beside a marker (which that user can leave too), to a block device, had
// a root Compact read the whole disk and write it back, a megabyte at a
// time, under the file systems mounted on it, undoing their writes made
// meanwhile. Nothing is ever written through a link (TestCompactNever-
// FollowsPlantedLink holds Compact's own copy to the same): what is not a
// regular file is left to the reading of the log, which refuses it. Here
// the link names a regular file, whose modification time tells a write.
func TestRewriteAfterFailureNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), rvRecord("k0", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	target := filepath.Join(t.TempDir(), "elsewhere")
	content := []byte("not a log segment\n")
	require.NoError(t, os.WriteFile(target, content, 0o600))
	long := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, os.Chtimes(target, long, long))
	require.NoError(t, os.Symlink(target, segmentPath(dir, "j.db", 7)))
	require.NoError(t, os.WriteFile(path+writeFailedSuffix, []byte("planted\n"), 0o600))

	_, err = Open(path)
	require.ErrorIs(t, err, ErrCorrupt, "the planted segment, refused as reading the log refuses it")
	fi, err := os.Stat(target)
	require.NoError(t, err)
	require.True(t, fi.ModTime().Equal(long), "written through the link at %v", fi.ModTime())
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, content, got)
}
