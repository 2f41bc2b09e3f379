package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// withFailSync makes Open call fail with each log segment it makes durable
// before it relies on it, in place of the segment's fdatasync when fail
// returns an error.
func withFailSync(fail func(path string) error) Option {
	return optionFunc(func(c *config) { c.failSync = fail })
}

// TestOpenMakesRecoveredLogDurable: a process killed after its round's
// write(2) and before the fdatasync returned leaves the round in the page
// cache only (fsync(2): written data reaches the disk at the kernel's
// writeback, dirty_expire_centisecs, 30 s by default). The next Open reads
// those entries back and builds on them: it publishes them, and its next
// segment starts after them. So it makes them durable first: otherwise a
// power cut loses them while the new segment's fsync'd rounds survive, and
// the Open after it finds a hole (acknowledged writes missing, ErrCorrupt)
// though this process may have sent requests for the lost records. A
// segment that cannot be synced fails Open, and leaves the log as it was.
func TestOpenMakesRecoveredLogDurable(t *testing.T) {
	ctx := context.Background()
	path := crashedJournal(t, createKeys(t, 3))
	seg, data := segmentData(t, path)

	s, err := Open(path, withFailSync(func(string) error { return syscall.EIO }))
	require.ErrorIs(t, err, syscall.EIO, "Open over a log it cannot make durable")
	require.Nil(t, s)
	require.Equal(t, []string{seg}, segmentsOf(t, path), "no new segment after a failed sync")
	after, err := os.ReadFile(seg)
	require.NoError(t, err)
	require.Equal(t, data, after, "the segment as the crash left it")

	s, synced := openSyncing(t, path, withApplyDelay(time.Hour))
	// The failed sync may have left the entries in memory alone (see
	// rewriteAfterFailure): the file and the segment are written again
	// and synced first, then the segment synced as recovered.
	require.Equal(t, []string{path, seg, seg}, *synced, "files synced by Open")
	for i := range 3 {
		_, err := s.Get(ctx, "s", fmt.Sprint("k", i))
		require.NoError(t, err, "k%d", i)
	}
	require.NoError(t, s.Close())

	// Closed cleanly: no log left, nothing to sync.
	s, synced = openSyncing(t, path)
	require.Empty(t, *synced, "segments synced after a clean Close")
	require.NoError(t, s.Close())
}

// TestOpenMakesVoidingSegmentDurable: a round whose fdatasync failed twice
// leaves its bytes in two segments, voided by a third, empty one that
// starts at the round's first entry. Open syncs that one too: if a power
// cut took its header or its name, the failed round, on disk in the others,
// would come back though its writer was told it is not there.
func TestOpenMakesVoidingSegmentDurable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour))
	require.NoError(t, err)
	_, err = s.Create(ctx, rvRecord("old", rvT0))
	require.NoError(t, err)
	// Applied: the voiding segment then holds nothing past the file's
	// applied position, and starts past it.
	require.NoError(t, s.Checkpoint(ctx))
	logFault{written: true, writes: 2}.install(s)
	_, err = s.Create(ctx, rvRecord("k", rvT0))
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, ErrMaybeCommitted, "voided by a new segment")
	s.crash(t)
	segs := segmentsOf(t, path)
	require.Len(t, segs, 3, "the first try's, the second's, the voiding one")

	s, synced := openSyncing(t, path, withApplyDelay(time.Hour))
	defer s.Close()
	require.ElementsMatch(t, segs, *synced, "segments synced by Open")
	_, err = s.Get(ctx, "s", "k")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.Get(ctx, "s", "old")
	require.NoError(t, err)
}
