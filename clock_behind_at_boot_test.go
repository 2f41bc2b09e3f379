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

// A board with neither a real-time clock nor fake-hwclock boots at the
// epoch, 1970 ("the system clock ... will be reset to 1970-01-01 on each
// boot" without an RTC or fake-hwclock, fake-hwclock(8),
// https://manpages.debian.org/wheezy/fake-hwclock/fake-hwclock.8), and
// NTP steps it fifty-six years forward half an hour later. What the
// process settles afterwards was journaled on the right clock: once past
// the retention it is pruned, by Prune and by Run, which have seen the
// step, not kept until the process restarts (months, on a device, its
// journal filling the flash). What it settled before the step is pruned
// too: the retention has passed since the step.
func TestPruneAfterStepForwardFromEpoch(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prune func(t *testing.T, e *env, want int)
	}{
		{"Run", func(t *testing.T, e *env, _ int) { runUntil(t, e, e.clock.Now().Add(2*time.Hour)) }},
		{"Prune", func(t *testing.T, e *env, want int) {
			n, err := e.client.Prune(e.ctx)
			require.NoError(t, err)
			require.Equal(t, want, n, "operations pruned")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &behindAtBootClock{}
			e := newEnv(t, clientOpts(idem.WithClock(clk)))
			clk.Clock, clk.start = e.clock, e.clock.Now()
			clk.behind = clk.start.Sub(time.Unix(0, 0))
			clk.fixed = clk.start.Add(30 * time.Minute)
			keys := []string{"before-the-step", "after-the-step"}
			for i, k := range keys {
				e.clock.Advance(time.Duration(i) * time.Hour)
				res, err := e.client.Submit(e.ctx, e.req(k, `{"amount":100}`))
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
			}
			tt.prune(t, e, 0) // sees the step

			e.clock.Advance(idem.DefaultRetainSettled + time.Hour)
			tt.prune(t, e, 2)
			for _, k := range keys {
				_, err := e.client.Lookup(e.ctx, idem.DefaultScope, k)
				require.ErrorIsf(t, err, idem.ErrNotFound, "%s: settled more than the retention ago, kept", k)
			}
		})
	}
}

// The same board: an order journaled after the step, its host down for
// good, goes to a person once past the 72 h reconciliation deadline, not
// only once the process restarts.
func TestRunDeadlineAfterStepForwardFromEpoch(t *testing.T) {
	clk := &behindAtBootClock{}
	down := &downTransport{}
	e := newEnv(t, clientOpts(idem.WithClock(clk), idem.WithHTTPClient(&http.Client{Transport: down})))
	start := e.clock.Now()
	clk.Clock, clk.start, clk.fixed = e.clock, start, start.Add(30*time.Minute)
	clk.behind = start.Sub(time.Unix(0, 0))
	down.base, down.clock, down.up = e.srv.Client().Transport, e.clock, start.Add(1000*time.Hour)
	// Its first order, at boot, before the step: the host down already.
	_, err := e.client.Submit(e.ctx, e.req("at-boot", `{"amount":100}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	e.clock.Advance(time.Hour)
	_, err = e.client.Submit(e.ctx, e.req("k", `{"amount":100}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	runUntil(t, e, start.Add(idem.DefaultReconcileDeadline+3*time.Hour))
	rec := e.record("k")
	require.Equal(t, idem.ReviewDeadlinePassed, rec.Review, "state %v", rec.State)
	require.Empty(t, e.submits("k"), "submits that reached the server")
}
