package journal

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDamagedEntryInNewestSegment: a damaged entry (a bad sector) in the
// newest segment, followed by intact rounds written and fsync'd after
// it, is damage to acknowledged writes, not a torn tail: Open fails
// closed, as it does for the same damage in an older segment
// (TestLogDamage). Rounds are framed so that the two can be told apart.
func TestDamagedEntryInNewestSegment(t *testing.T) {
	ctx := context.Background()
	const n = 4
	path := crashedJournal(t, createKeys(t, n))
	seg, data := segmentData(t, path)
	ends := entryEnds(t, path, data)
	require.Len(t, ends, n)
	// One byte of the second entry's payload: entries 3 and 4, written
	// and synced in later rounds, are intact behind it.
	flipByte(t, seg, roundEnd(ends[0]-roundHeaderSize, 0)+roundHeaderSize+entryHeaderSize+5)

	s, err := Open(path, ReadOnly())
	if err == nil {
		var missing []string
		for i := range n {
			if _, gerr := s.Get(ctx, "s", fmt.Sprint("k", i)); gerr != nil {
				missing = append(missing, fmt.Sprint("k", i))
			}
		}
		require.NoError(t, s.Close())
		t.Fatalf("Open accepted a log whose intact, acknowledged entries follow a damaged one; records missing: %v", missing)
	}
	require.ErrorIs(t, err, ErrCorrupt)
}
