package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An operation sent while the clock was right and settled after the clock
// was stepped back eight days has a Settled time eight days too old. Once
// the clock is corrected, pruning must not take it for a week old: a
// request resubmitted with its key two days later (the server, which keeps
// keys 24 h, has forgotten it) must find the journaled result, not be sent
// again as a new order.
func TestPruneKeepsOperationSettledWhileClockSteppedBack(t *testing.T) {
	clk := &skewedClock{}
	e := newEnv(t, serverOpts(idemtest.WithRetention(idem.KeyRetentionStripe)), clientOpts(idem.WithClock(clk)))
	clk.Clock = e.clock
	const body = `{"amount":100}`
	_, err := e.client.Prepare(e.ctx, e.req("k", body))
	require.NoError(t, err)
	e.crashMidAttempt("k")
	e.sendRaw("k", body) // the crashed process's request reached the server

	clk.offset.Store(int64(-8 * 24 * time.Hour)) // NTP steps the clock eight days back
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded, "the result endpoint settles it: %+v", sum)

	clk.offset.Store(0) // and corrects it
	e.clock.Advance(time.Hour)
	n, err := e.client.Prune(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "Prune() deleted an operation settled an hour ago")

	e.clock.Advance(2 * 24 * time.Hour) // the server has forgotten the key
	res, err := e.client.Submit(e.ctx, e.req("k", body))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Len(t, e.submits("k"), 1, "submits that reached the server")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
}

// steppedClock is the client's clock: the shared one, set ahead by ahead
// while the shared one reads within [from, to), as NTP steps a clock
// ahead (a bad time source, a wrong hardware clock at boot) and back.
type steppedClock struct {
	*idemtest.Clock
	from, to time.Time
	ahead    time.Duration
}

func (c *steppedClock) Now() time.Time {
	now := c.Clock.Now()
	if !now.Before(c.from) && now.Before(c.to) {
		return now.Add(c.ahead)
	}
	return now
}

// A clock eight days fast for twenty minutes must not make Run prune an
// operation settled two days ago: the server, which keeps keys 24 h, has
// forgotten its key, and a request resubmitted with it once the clock is
// right must find the journaled result, not be sent again as a new order.
// Run still prunes what the right clock says is past retention.
func TestRunPruneOutlivesClockSteppedAhead(t *testing.T) {
	for _, tt := range []struct {
		name string
		from time.Duration // after Run starts, by the shared clock
	}{
		{"at start-up", 0},
		{"while Run runs", 110 * time.Minute}, // across Run's hourly prune
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := &steppedClock{}
			e := newEnv(t, serverOpts(idemtest.WithRetention(idem.KeyRetentionStripe)), clientOpts(idem.WithClock(clk)))
			clk.Clock = e.clock
			const body = `{"amount":100}`
			_, err := e.client.Submit(e.ctx, e.req("old", body))
			require.NoError(t, err)
			e.clock.Advance(8 * 24 * time.Hour)
			_, err = e.client.Submit(e.ctx, e.req("k", body))
			require.NoError(t, err)
			e.clock.Advance(2 * 24 * time.Hour) // the server has forgotten "k"

			start := e.clock.Now()
			clk.from, clk.to, clk.ahead = start.Add(tt.from), start.Add(tt.from+20*time.Minute), 8*24*time.Hour
			runUntil(t, e, start.Add(3*time.Hour))

			_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "old")
			require.ErrorIs(t, err, idem.ErrNotFound, "settled ten days ago: pruned")
			_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "k")
			require.NoError(t, err, "settled two days ago: kept a week")
			res, err := e.client.Submit(e.ctx, e.req("k", body))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Len(t, e.submits("k"), 1, "submits that reached the server")
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
		})
	}
}

// A process that lives less than an hour (a job run by cron, a service
// deployed often) must still prune, or its journal grows without end and
// fills the disk: Run prunes at start-up what is past twice the retention
// (a clock fast by less than the retention cannot prune early then), and
// the rest once it has measured an hour.
func TestRunPrunesAtStartUpWhatIsFarPastRetention(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Submit(e.ctx, e.req("ancient", `{"amount":100}`))
	require.NoError(t, err)
	e.clock.Advance(idem.DefaultRetainSettled + time.Hour)
	_, err = e.client.Submit(e.ctx, e.req("old", `{"amount":100}`))
	require.NoError(t, err)
	e.clock.Advance(idem.DefaultRetainSettled + time.Hour) // "ancient" is past twice the retention, "old" past it

	start := e.clock.Now()
	runUntil(t, e, start.Add(10*time.Minute))
	_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "ancient")
	require.ErrorIs(t, err, idem.ErrNotFound, "past twice the retention: pruned at start-up")
	_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "old")
	require.NoError(t, err, "past the retention only: kept until Run has measured an hour")

	runUntil(t, e, start.Add(2*time.Hour))
	_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "old")
	require.ErrorIs(t, err, idem.ErrNotFound, "pruned once Run has measured an hour")
}

// A clock stepped back for a while as Run prunes keeps it from pruning
// only while the step lasts: once the clock is right again, an operation
// that has passed retention since is pruned on time, not a step later.
func TestRunPruneCatchesUpAfterClockSteppedBack(t *testing.T) {
	clk := &steppedClock{}
	e := newEnv(t, clientOpts(idem.WithClock(clk)))
	clk.Clock = e.clock
	_, err := e.client.Submit(e.ctx, e.req("old", `{"amount":100}`))
	require.NoError(t, err)
	e.clock.Advance(idem.DefaultRetainSettled - 150*time.Minute) // past retention 2.5 h after Run starts

	start := e.clock.Now()
	clk.from, clk.to, clk.ahead = start.Add(110*time.Minute), start.Add(130*time.Minute), -8*24*time.Hour
	runUntil(t, e, start.Add(200*time.Minute))
	_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "old")
	require.ErrorIs(t, err, idem.ErrNotFound, "past retention since 2.5 h after Run started: pruned by the prune at 3 h")
}

// runUntil runs e's client's Run until the shared clock, which Run's
// waits move, reads end, then stops it at its next wait, however late
// this goroutine runs (Run, unheld, ran hours of clock past end on a
// loaded machine before a test polling the clock saw it there, and
// pruned what it should have kept). Run does what it does by end and,
// no later, what it does on waking from the wait that crosses end: a
// pass's poll is at most 5 s, but an operation's backoff or Retry-After
// wait may end well past end, and its resend is made before the hold.
func runUntil(t *testing.T, e *env, end time.Time) {
	t.Helper()
	runUntilDone(t, e, end, nil)
}

// runUntilDone is runUntil that also stops Run once done (if not nil)
// holds, so that a test can wait for an outcome Run reaches later on a
// slower path (a host it took for down on a loaded machine, its
// operations postponed) without letting a fast path run on to end. done
// is polled every millisecond while Run runs, not between Run's steps:
// Run may act, and move the clock up to end, between done first holding
// and its cancel, so a test checks what Run must not do next after a
// runUntil that follows, not at done.
func runUntilDone(t *testing.T, e *env, end time.Time, done func() bool) {
	t.Helper()
	held, release := e.clock.HoldFrom(end)
	defer release()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ran := runAsync(ctx, e.client)
	// Only a Run that hangs meets the deadline: one pass takes
	// milliseconds, and one that takes longer under load only waits.
	deadline := time.After(5 * time.Minute)
	var poll <-chan time.Time
	if done != nil {
		ticker := time.NewTicker(time.Millisecond)
		defer ticker.Stop()
		poll = ticker.C
	}
	for wait := true; wait; {
		select {
		case <-held:
			wait = false
		case <-poll:
			wait = !done()
		case err := <-ran:
			t.Fatalf("Run returned %v with its clock %v short of its end", err, end.Sub(e.clock.Now()))
		case <-deadline:
			t.Fatalf("Run's clock %v short of its end after 5 minutes", end.Sub(e.clock.Now()))
		}
	}
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
}
