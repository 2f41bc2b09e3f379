package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// rotateOverlayMax is the "rotate" child's overlay bound: its segments are
// at most half of it, so that one large record fills the first.
const rotateOverlayMax = 64 << 10

// rotateChild creates "order-0", large enough to fill the log's first
// segment, then "order-1", which the next segment takes, each
// acknowledged, and reports them; the applier (an hour away) copies
// neither into the file, which still names the first segment as the log
// it depends on.
func rotateChild(s *journal.Store, path string) {
	for i, size := range []int{rotateOverlayMax / 2, 0} {
		rec := journaltest.NewRecord("acct", fmt.Sprintf("order-%d", i), t0)
		rec.Header.Set("X-Pad", strings.Repeat("p", size))
		if _, err := s.Create(context.Background(), rec); err != nil {
			fmt.Printf("ERROR %v\n", err)
			os.Exit(2)
		}
		segs, _ := filepath.Glob(path + ".log.*")
		fmt.Printf("ACK %s %d\n", rec.Key, len(segs))
	}
	fmt.Println("DONE")
}

// rotatedThenKilled runs the "rotate" child on the journal at path and
// SIGKILLs it once both writes are acknowledged, the second in a segment
// the file does not name. It returns the log's segments, oldest first.
func rotatedThenKilled(t *testing.T, path string) []string {
	t.Helper()
	c := startChild(t, "rotate", path)
	acked := killAfterDone(t, c)
	require.Equal(t, []string{"order-0 1", "order-1 2"}, acked, "each write acknowledged, the second in a new segment; stderr:\n%s", c.stderr.String())
	segs, err := filepath.Glob(path + ".log.*")
	require.NoError(t, err)
	slices.Sort(segs) // generations are fixed-width hex
	require.Len(t, segs, 2)
	return segs
}

// The file records the log segment it depends on when a Store's first
// round starts one; a segment started when the last grew full was not
// recorded until the applier's next commit (25 ms later, or never while
// the file cannot be written). A backup made file by file while the
// service ran (restic, kopia, Velero's file-system backup: the directory
// is listed, then each file read) that listed the directory just before
// such a rotation holds the file and the older segment, not the newer
// one: restored, Open read the older segment to its end, found nothing
// missing, and the orders acknowledged in the newer one were gone without
// a word, journaled and perhaps sent, never resumed. The same held for
// the newer segment deleted alone. The older segment now says where the
// log goes on, and Open refuses the journal while that segment is
// missing, as it does when the one the file names is.
func TestSegmentLostAfterRotationIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a child process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	segs := rotatedThenKilled(t, path)

	// The backup: the file and the segment its directory listing held.
	restored := filepath.Join(t.TempDir(), "journal.db")
	for _, p := range []string{path, segs[0]} {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(restored), filepath.Base(p)), data, 0o600))
	}
	before, err := os.ReadFile(restored)
	require.NoError(t, err)

	_, err = journal.Open(restored)
	require.ErrorIs(t, err, journal.ErrLogMissing, "Open of a journal whose newer segment, holding an acknowledged write, is gone")
	require.NotErrorIs(t, err, journal.ErrCorrupt, "the file is whole")
	require.Contains(t, err.Error(), filepath.Base(segs[1]), "the error names the missing segment")
	require.Contains(t, err.Error(), "AcceptLostLog", "the error says how to go on knowingly")
	after, err := os.ReadFile(restored)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "the refused journal was changed")
	left, err := filepath.Glob(restored + ".log.*")
	require.NoError(t, err)
	require.Len(t, left, 1, "the refusal changed the log")

	// Read-only, the operator sees what is left, with a warning, and the
	// check reports it.
	var logged bytes.Buffer
	s, err := journal.Open(restored, journal.ReadOnly(), journal.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	_, err = s.Get(ctx, "acct", "order-0")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Contains(t, logged.String(), filepath.Base(segs[1]), "the read-only Open warns")
	rep, err := journal.Inspect(restored)
	require.ErrorIs(t, err, journal.ErrLogMissing)
	require.Len(t, rep.Problems, 1)
	require.Contains(t, rep.Problems[0], filepath.Base(segs[1]))

	// Knowingly: the journal goes on without the lost write, and the next
	// Open, before any write, does not refuse it again.
	s, err = journal.Open(restored, journal.AcceptLostLog())
	require.NoError(t, err)
	_, err = s.Get(ctx, "acct", "order-0")
	require.NoError(t, err, "the older segment's write")
	_, err = s.Get(ctx, "acct", "order-1")
	require.ErrorIs(t, err, journal.ErrNotFound, "what the refusal kept from being lost without a word")
	s.Crash(t)
	requireAcked(t, restored, []string{"order-0"})
	s, err = journal.Open(restored)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "after", t0))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	requireAcked(t, restored, []string{"order-0", "after"})

	// The journal with its whole log lost nothing, and opens as before,
	// read-only or not, killed again or closed.
	requireAcked(t, path, []string{"order-0", "order-1"}, journal.ReadOnly())
	require.NoError(t, journal.Check(path))
	s, err = journal.OpenUnapplied(path)
	require.NoError(t, err)
	s.Crash(t)
	requireAcked(t, path, []string{"order-0", "order-1"})
	requireAcked(t, copyAlone(t, path), []string{"order-0", "order-1"})
}
