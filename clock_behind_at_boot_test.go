package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// behindAtBootClock is a clock behind the true time (the shared clock)
// by behind until the shared clock reads fixed, when NTP steps it right,
// with a monotonic reading no step moves, as time.Now's.
type behindAtBootClock struct {
	*idemtest.Clock
	start, fixed time.Time
	behind       time.Duration
}

func (c *behindAtBootClock) Now() time.Time {
	now := c.Clock.Now()
	if now.Before(c.fixed) {
		return now.Add(-c.behind)
	}
	return now
}

// Monotonic is the time since start by the shared clock, whatever the
// step.
func (c *behindAtBootClock) Monotonic() time.Duration { return c.Clock.Now().Sub(c.start) }

// A board without a real-time clock boots at the time fake-hwclock saved
// when it was shut down, eight days ago, and NTP, "not available early in
// the boot process" (fake-hwclock(8),
// https://manpages.debian.org/wheezy/fake-hwclock/fake-hwclock.8), steps
// it right half an hour later. An order settled in that half hour is
// journaled eight days early: neither Run, once it has measured its first
// hour (its anchor is the clock put right), nor a Prune must take it for
// a week old and delete it. Stripe forgets a key after 24 h ("We generate
// a new request if a key is reused after the original is pruned",
// https://docs.stripe.com/idempotency): the request redelivered two days
// later with the same key must find its result in the journal, kept a
// week, not be sent again as a second order.
func TestPruneKeepsOperationSettledWhileClockRanBehind(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prune func(t *testing.T, e *env)
	}{
		{"Run", func(t *testing.T, e *env) { runUntil(t, e, e.clock.Now().Add(3*time.Hour)) }},
		{"Prune", func(t *testing.T, e *env) {
			e.clock.Advance(3 * time.Hour)
			n, err := e.client.Prune(e.ctx)
			require.NoError(t, err)
			require.Zero(t, n, "operations pruned")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &behindAtBootClock{behind: 8 * 24 * time.Hour}
			e := newEnv(t, serverOpts(idemtest.WithRetention(idem.KeyRetentionStripe)), clientOpts(idem.WithClock(clk)))
			clk.Clock, clk.start = e.clock, e.clock.Now()
			clk.fixed = clk.start.Add(30 * time.Minute)
			const body = `{"amount":100}`
			res, err := e.client.Submit(e.ctx, e.req("k", body))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)

			tt.prune(t, e)
			_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "k")
			require.NoError(t, err, "settled hours ago: kept a week")

			e.clock.Advance(2 * 24 * time.Hour) // the server has forgotten "k"
			res, err = e.client.Submit(e.ctx, e.req("k", body))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Len(t, e.submits("k"), 1, "submits that reached the server")
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
		})
	}
}

// The same board, its payment host down as it boots (a long outage): an
// order the host never received (every connection refused) is journaled
// eight days early, and once NTP has stepped the clock right it must not
// look past the 72 h reconciliation deadline and go to a person, never to
// be sent again: it is minutes old. Once the host is back, Run sends it,
// once.
func TestRunDeadlineOutlivesClockBehindAtBoot(t *testing.T) {
	clk := &behindAtBootClock{behind: 8 * 24 * time.Hour}
	down := &downTransport{}
	e := newEnv(t, clientOpts(idem.WithClock(clk), idem.WithHTTPClient(&http.Client{Transport: down})))
	start := e.clock.Now()
	clk.Clock, clk.start, clk.fixed = e.clock, start, start.Add(30*time.Minute)
	down.base, down.clock, down.up = e.srv.Client().Transport, e.clock, start.Add(150*time.Minute)
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":100}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StatePending, res.State, "the host refused every connection: never sent")

	runUntil(t, e, start.Add(5*time.Hour))
	requireOrderedOnce(t, e, "k")
}
