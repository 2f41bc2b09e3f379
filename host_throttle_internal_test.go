package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A host that answers 429 naming no wait rests from the first rest on,
// doubling (±50% jitter) with each such 429 after a rest, never past
// the maximum; a 429 while it rests answers a request sent before and
// lengthens nothing; an answer let through starts it over, and leaves
// the rest under way as it was.
func TestThrottledHostRestsGrowUntilLetThrough(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := newHostStalls(8)
	h.firstRest, h.maxRest = 30*time.Second, time.Hour
	const host = "api.example"
	rest := func() time.Duration {
		t.Helper()
		until, ok := h.restUntil(host, now)
		require.True(t, ok, "resting")
		return until.Sub(now)
	}
	for i, nominal := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute} {
		h.throttled(host, now)
		d := rest()
		require.GreaterOrEqualf(t, d, nominal/2, "rest %d", i)
		require.LessOrEqualf(t, d, nominal*3/2, "rest %d", i)

		// Late answers of the burst the rest stopped.
		h.throttled(host, now.Add(time.Second))
		require.Equalf(t, d, rest(), "rest %d after a 429 while resting", i)
		now = now.Add(d)
	}

	until := now.Add(time.Second)
	h.rested(host, until) // a rest under way, told by Retry-After
	h.letThrough(host)
	require.Equal(t, time.Second, rest(), "the rest under way")
	now = until
	h.throttled(host, now)
	require.LessOrEqual(t, rest(), 45*time.Second, "first rest after an answer let through")

	for range 20 {
		now = now.Add(rest())
		h.throttled(host, now)
		require.LessOrEqual(t, rest(), h.maxRest, "rest")
	}
	require.GreaterOrEqual(t, rest(), h.maxRest/2, "rest at the maximum")
}
