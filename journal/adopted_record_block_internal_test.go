package journal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

// TestAdoptedRecordSharesNoAttemptsWithTheClient: a client-owned create of
// one attempt copies the record and its attempt in one allocation (two
// before), and the copy Create hands back shares no attempt with the
// client's record: a write into either leaves the other as it was, and
// an append to the copy's attempts (capped at their length) changes
// nothing of the copy's record. The journal holds what was created.
func TestAdoptedRecordSharesNoAttemptsWithTheClient(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	mine := ownedTestRecord("k")
	mine.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: start}}
	owned.Mark(mine)
	require.True(t, mine.clientOwned(), "marked")
	allocs := testing.AllocsPerRun(200, func() { adopt(mine) })
	require.LessOrEqual(t, allocs, 1.0, "allocations per adopt")

	s := ownedTestStore(t)
	ctx := context.Background()
	stored, err := s.Create(ctx, mine)
	require.NoError(t, err)
	require.Equal(t, 1, cap(stored.Attempts), "the copy's attempts' capacity")
	mine.Attempts[0].Err = "the client's"
	require.Empty(t, stored.Attempts[0].Err, "the copy's attempt after the client's changed")
	stored.Attempts[0].Status = 500
	require.Zero(t, mine.Attempts[0].Status, "the client's attempt after the copy's changed")
	before := *stored
	stored.Attempts = append(stored.Attempts, Attempt{Number: 2, Kind: AttemptSubmit, Start: start})
	before.Attempts = stored.Attempts
	require.Equal(t, before, *stored, "the copy after an append to its attempts")

	got, err := s.Get(ctx, "s", "k")
	require.NoError(t, err)
	require.Equal(t, []Attempt{{Number: 1, Kind: AttemptSubmit, Start: start}}, got.Attempts, "journaled")

	for _, n := range []int{0, 2} {
		r := ownedTestRecord("n" + string(rune('0'+n)))
		for i := range n {
			r.Attempts = append(r.Attempts, Attempt{Number: i + 1, Kind: AttemptSubmit, Start: start})
		}
		owned.Mark(r)
		c, err := s.Create(ctx, r)
		require.NoError(t, err)
		g, err := s.Get(ctx, "s", r.Key)
		require.NoError(t, err)
		require.Equal(t, g.Attempts, c.Attempts, "%d attempts: Create's copy and Get", n)
		require.Len(t, c.Attempts, n)
	}
}
