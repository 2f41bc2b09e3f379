package idem

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Past maxBudgetHosts hosts drained to half, the others share one
// bucket: it is charged and refilled, and never grows the map.
func TestRetryBudgetBeyondItsHosts(t *testing.T) {
	b := newRetryBudget(4, 1, time.Now)
	for i := range maxBudgetHosts {
		b.failure(fmt.Sprint("h", i))
		b.failure(fmt.Sprint("h", i))
	}
	require.True(t, b.allowRetry("new"), "the shared bucket starts full")
	b.failure("new")
	b.failure("other")
	require.False(t, b.allowRetry("new"), "4 → 2: at half, retries stop")
	b.success("other")
	require.True(t, b.allowRetry("new"), "the shared bucket refills from its hosts' successes")
	require.Len(t, b.hosts, maxBudgetHosts)
	require.False(t, b.allowRetry("h0"), "2 of 4 tokens")
	b.success("h0")
	b.success("h0")
	require.Len(t, b.hosts, maxBudgetHosts-1, "a full bucket takes no room")

	// With room again, the shared bucket is full: a good day is one
	// again (anyLow), and a later crowd starts from full.
	for i := 1; i < maxBudgetHosts; i++ {
		b.success(fmt.Sprint("h", i))
		b.success(fmt.Sprint("h", i))
	}
	require.Empty(t, b.hosts)
	require.False(t, b.anyLow(), "every bucket full")
}

// A good day's successes skip the budget (anyLow false); one failure, and
// they are counted again until its bucket is full.
func TestRetryBudgetAnyLow(t *testing.T) {
	b := newRetryBudget(4, 0.5, time.Now)
	require.False(t, b.anyLow())
	b.failure("h")
	require.True(t, b.anyLow())
	b.success("h")
	require.True(t, b.anyLow(), "3.5 of 4")
	b.success("h")
	require.False(t, b.anyLow(), "full again")
	require.False(t, newRetryBudget(0, 0, time.Now).anyLow(), "budget off")
}
