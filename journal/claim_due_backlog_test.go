package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClaimDueReadsNoMoreThanItClaims: after a long outage thousands of
// operations are due at once, and Run claims them a batch at a time. A
// ClaimDue that decoded every due record to claim a few made each pass
// cost as much as the whole backlog (memory included: every body at
// once), and draining it quadratic. Its cost must follow the batch, not
// the backlog.
func TestClaimDueReadsNoMoreThanItClaims(t *testing.T) {
	ctx := context.Background()
	allocs := func(due int) float64 {
		s, _ := rvOpen(t, WithUnsafeNoSync())
		for i := range due {
			_, err := s.Create(ctx, rvRecord(fmt.Sprintf("k%05d", i), rvT0))
			require.NoError(t, err)
		}
		require.NoError(t, s.Checkpoint(ctx))
		now := rvT0.Add(time.Hour)
		return testing.AllocsPerRun(5, func() {
			got, err := s.ClaimDue(ctx, "run", now, now.Add(time.Minute), 4)
			require.NoError(t, err)
			require.Len(t, got, 4)
			for _, c := range got {
				require.NoError(t, s.Release(ctx, c.Lease))
			}
		})
	}
	few, many := allocs(8), allocs(4000)
	require.Less(t, many, 2*few, "ClaimDue of 4 allocates %.0f times with 4000 due, %.0f with 8", many, few)
}
