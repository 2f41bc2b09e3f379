package idem

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

const throttleHost = "api.example"

// throttledHost is Run's host stalls at its default interval and
// maximum, and how long throttleHost rests from *now on (it must).
func throttledHost(t *testing.T, now *time.Time) (*hostStalls, func() time.Duration) {
	h := newHostStalls(8)
	h.firstRest, h.maxRest = DefaultReconcileInterval, DefaultReconcileMaxInterval
	return h, func() time.Duration {
		t.Helper()
		until, ok := h.restUntil(throttleHost, *now)
		require.True(t, ok, "resting")
		return until.Sub(*now)
	}
}

// A host that answers 429 naming no wait rests from the first rest on,
// doubling (±50% jitter) with each such 429 after a rest, never past
// the maximum; a 429 while it rests answers a request sent before and
// lengthens nothing; an answer let through starts it over, and leaves
// the rest under way as it was.
func TestThrottledHostRestsGrowUntilLetThrough(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h, rest := throttledHost(t, &now)
	for i, nominal := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute} {
		h.throttled(throttleHost, now)
		d := rest()
		require.GreaterOrEqualf(t, d, nominal/2, "rest %d", i)
		require.LessOrEqualf(t, d, nominal*3/2, "rest %d", i)

		// Late answers of the burst the rest stopped.
		h.throttled(throttleHost, now.Add(time.Second))
		require.Equalf(t, d, rest(), "rest %d after a 429 while resting", i)
		now = now.Add(d)
	}

	until := now.Add(time.Second)
	h.rested(throttleHost, until) // a rest under way, told by Retry-After
	h.letThrough(throttleHost)
	require.Equal(t, time.Second, rest(), "the rest under way")
	now = until
	h.throttled(throttleHost, now)
	require.LessOrEqual(t, rest(), 45*time.Second, "first rest after an answer let through")

	for range 20 {
		now = now.Add(rest())
		h.throttled(throttleHost, now)
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
	h, rest := throttledHost(t, &now)
	h.maxRest = time.Duration(math.MaxInt64)

	h.rested(throttleHost, now.Add(time.Minute)) // a Retry-After's
	require.Equal(t, time.Minute, rest(), "a Retry-After's rest")

	h.rest = map[string]time.Time{}
	h.throttled(throttleHost, now)
	require.Positive(t, rest(), "the backoff's rest after a bare 429")

	h.slowed(throttleHost, now)
	h.passJudged(map[string]bool{throttleHost: true}, map[string]time.Time{throttleHost: now.Add(time.Minute)}, now)
	require.Contains(t, h.slow, throttleHost, "a slow host whose pushed-back operations wait")

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

// A host's backoff is for one throttle: a bare 429 long after its last
// rest ended, with nothing let through since (the host's operations
// settled by another replica's Run, by Do or by Confirm, none left for
// this Run to visit), starts it over. Kept, one 429 days later rested
// the host an hour: its operations postponed past their key window, for
// a person, where a resend within it would have settled them.
func TestThrottledHostBackoffStartsOverLongAfterItsLastRest(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h, rest := throttledHost(t, &now)
	for range 10 {
		h.throttled(throttleHost, now)
		now = now.Add(rest())
	}
	h.throttled(throttleHost, now)
	require.GreaterOrEqual(t, rest(), h.maxRest/2, "rest in a throttle lasting hours")

	now = now.Add(rest() + 3*24*time.Hour)
	h.throttled(throttleHost, now)
	require.LessOrEqual(t, rest(), 45*time.Second, "first rest of a throttle days later")
}
