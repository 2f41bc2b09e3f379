package journal_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestInspectListsFailedWriteWhenWalkStops: Inspect listed the marker of
// a failed write (the disk may not hold what the file shows) only when
// its walk of the file finished. A damaged page that stopped the walk
// hid it, and the operator read "damaged" alone: the failed write that
// may explain the damage, and that what was read came from memory, went
// unsaid. Both are listed now.
func TestInspectListsFailedWriteWhenWalkStops(t *testing.T) {
	path := settledJournal(t, 3000)
	damageFirstLeaf(t, path, "done.seq", pageDamages()["wrong page id"])
	require.NoError(t, os.WriteFile(path+".write-failed", []byte("2026-03-01T12:00:00Z input/output error\n"), 0o600))

	rep, err := journal.Inspect(path)
	require.ErrorIs(t, err, journal.ErrCorrupt, "the walk stopped on the damaged page")
	require.Len(t, rep.Problems, 2, "the damaged page and the failed write: %q", rep.Problems)
	require.True(t, strings.HasPrefix(rep.Problems[0], "damaged: "), "what stopped the walk: %q", rep.Problems[0])
	require.Contains(t, rep.Problems[1], "idem.journal.write-failed", "the failed write")
}
