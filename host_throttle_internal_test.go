package idem

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
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

// WithReconcile accepts any maximum, math.MaxInt64 ("no cap") too; a
// rest (a Retry-After's, or the backoff's after a bare 429) and a slow
// host's pushed-back wait are still kept until they end, not dropped
// as set by a clock running fast because the bound plus clockSlack
// overflowed.
func TestHostRestsKeptUnderTheLargestReconcileMaximum(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := newHostStalls(8)
	h.firstRest, h.maxRest = 30*time.Second, time.Duration(math.MaxInt64)
	const host = "api.example"

	h.rested(host, now.Add(time.Minute))
	until, ok := h.restUntil(host, now)
	require.True(t, ok, "a Retry-After's rest")
	require.Equal(t, now.Add(time.Minute), until)

	h.rest = map[string]time.Time{}
	h.throttled(host, now)
	_, ok = h.restUntil(host, now)
	require.True(t, ok, "the backoff's rest after a bare 429")

	h.slowed(host, now)
	h.passJudged(map[string]bool{host: true}, map[string]time.Time{host: now.Add(time.Minute)}, now)
	require.Contains(t, h.slow, host, "a slow host whose pushed-back operations wait")

	// The same bound guards a journaled Retry-After (a later Do or Resume
	// waits it out) and Run's hourly look for schedules past any reach.
	c := &Client{}
	c.cfg.reconcileMax, c.cfg.retryAfterCap = time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	rec := &journal.Record{State: journal.StateUnknown, NextDue: now.Add(time.Minute), Attempts: []journal.Attempt{{
		Number: 1, Kind: journal.AttemptSubmit, Start: now, Done: true, Wrote: true,
		Status: http.StatusTooManyRequests, RetryAfter: time.Minute,
	}}}
	require.Equal(t, now.Add(time.Minute), c.journaledRest(rec, now), "a journaled Retry-After")
	require.False(t, c.scheduledTooFar(rec, now), "an operation due in a minute")
}
