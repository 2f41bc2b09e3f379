package journal

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A Store's first round records the segment it starts as the log the
// file depends on (dependOnLog); when that commit fails before anything
// is written (the file cannot grow, a nearly full disk, while the log's
// appends still fit), the log takes the writes anyway and the file names
// no log. The seals that say the log goes on in a newer segment were
// then not read at all (checkSeals returned at once for a file naming no
// log): the first segment filled and was sealed, the next took an
// acknowledged write, the process was killed, and a restore that lacked
// the newer segment (a backup that listed the directory before the
// rotation) opened without a word, the write gone, its operation
// journaled, perhaps sent, never resumed. Open now refuses it
// (ErrLogMissing), and AcceptLostLog goes on, for good: the next Open,
// killed before any write, does not refuse it again.
func TestSegmentLostWhileFileNamesNoLogIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	lost := loseUnnamedSegment(t, path)

	_, err := Open(path)
	require.ErrorIs(t, err, ErrLogMissing, "Open of a journal whose acknowledged write k1 was in the lost segment")
	require.Contains(t, err.Error(), filepath.Base(lost), "the error names the lost segment")
	rep, err := Inspect(path)
	require.ErrorIs(t, err, ErrLogMissing)
	require.Len(t, rep.Problems, 1)

	s, err := Open(path, AcceptLostLog(), withApplyDelay(time.Hour))
	require.NoError(t, err)
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	_, err = s.Get(ctx, "s", "k1")
	require.ErrorIs(t, err, ErrNotFound, "what the refusal kept from being lost without a word")
	s.crash(t)
	s, err = Open(path)
	require.NoError(t, err, "accepted once, for good")
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	_, err = s.Create(ctx, rvRecord("after", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, Check(path))
}

// The same loss on a journal idem compact wrote: its copy recorded that
// it depends on no log by deleting the field, which reads as a file older
// than the field (logDep{0, 0}), and with an applied position past 0
// checkSeals took it for one an earlier release left stale and read no
// seal: the restore without the newer segment opened without a word, k1
// gone. The copy now records "no log, as of this applied position", as a
// clean Close does (retireLog).
func TestSegmentLostAfterCompactWhileFileNamesNoLogIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Create(ctx, rvRecord("before", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = Compact(path)
	require.NoError(t, err)
	lost := loseUnnamedSegment(t, path)

	_, err = Open(path)
	require.ErrorIs(t, err, ErrLogMissing, "Open of a compacted journal whose acknowledged write k1 was in the lost segment")
	require.Contains(t, err.Error(), filepath.Base(lost), "the error names the lost segment")
	_, err = Inspect(path)
	require.ErrorIs(t, err, ErrLogMissing)
}

// loseUnnamedSegment opens the journal at path with every commit of its
// file failing before it writes, so that the file names no log, has the
// log take k0 and k1 in two segments (rotateOnce), kills the Store, and
// removes the newer segment, as a restore without it would: it returns
// that segment's path.
func loseUnnamedSegment(t *testing.T, path string) string {
	t.Helper()
	s, err := Open(path, withApplyDelay(time.Hour), withOverlayMax(64<<10))
	require.NoError(t, err)
	written := false
	failFileCommits(s, &written) // every commit of the file, before it writes
	segs := rotateOnce(t, s, path)
	s.crash(t)
	require.NoError(t, os.Remove(segs[1]))
	return segs[1]
}

// A file that names no log and holds every write lost nothing when a
// sealed segment's successor is gone: the active segment found deleted
// (a cleanup job), the applier copied everything into the file and
// recorded that it depends on no log, and a crash came before the older
// segments were deleted. Open must not refuse that whole journal.
func TestAppliedSealedSegmentWithoutSuccessorOpens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, withApplyDelay(time.Hour), withOverlayMax(64<<10))
	require.NoError(t, err)
	segs := rotateOnce(t, s, path)
	require.NoError(t, s.Checkpoint(ctx))
	s.crash(t)
	// As the applier leaves it once everything is applied with its
	// active segment gone: the file names no log, the older segment is
	// still there.
	editMeta(t, path, func(meta *bolt.Bucket) error {
		return meta.Put(metaLogDep, append(make([]byte, 8), meta.Get(metaApplied)...))
	})
	require.NoError(t, os.Remove(segs[1]))
	s, err = Open(path)
	require.NoError(t, err, "a journal whose file holds every write")
	for _, k := range []string{"k0", "k1"} {
		_, err := s.Get(ctx, "s", k)
		require.NoError(t, err, k)
	}
	require.NoError(t, s.Close())
}

// rotateOnce creates k0, which fills the first segment of s (opened with
// an overlayMax of 64 KiB: segments of half that), then k1, which the
// next segment takes, and returns the journal's two segments.
func rotateOnce(t *testing.T, s *Store, path string) []string {
	t.Helper()
	ctx := context.Background()
	big := rvRecord("k0", rvT0)
	big.Body = []byte(strings.Repeat("p", 32<<10))
	big.BodySHA = sha256.Sum256(big.Body)
	_, err := s.Create(ctx, big)
	require.NoError(t, err)
	_, err = s.Create(ctx, rvRecord("k1", rvT0))
	require.NoError(t, err)
	segs := segmentsOf(t, path)
	require.Len(t, segs, 2, "k1 in a segment of its own")
	return segs
}
