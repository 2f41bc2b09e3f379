package idem_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// pollBlockClock is the env's manual clock, except that Run's poll (5 s)
// blocks until ctx ends, so Run makes exactly one pass.
type pollBlockClock struct{ *idemtest.Clock }

func (c pollBlockClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == 5*time.Second {
		<-ctx.Done()
		return ctx.Err()
	}
	return c.Clock.Sleep(ctx, d)
}

// pollSignalClock is the env's manual clock, except that Run's poll (5 s)
// reports on polled and then blocks until ctx ends: Run makes exactly one
// pass, and the test knows when it is over.
type pollSignalClock struct {
	*idemtest.Clock
	polled chan struct{}
}

func (c *pollSignalClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == 5*time.Second {
		select {
		case c.polled <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return c.Clock.Sleep(ctx, d)
}

// runOnePass runs the reconciler for exactly one pass over what is due.
func runOnePass(t *testing.T, e *env, clk *pollSignalClock) {
	t.Helper()
	rctx, stop := context.WithCancel(e.ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.client.Run(rctx) }()
	within(t, clk.polled, "Run's pass")
	stop()
	require.ErrorIs(t, within(t, ran, "Run"), context.Canceled)
}

// Backoff (DESIGN 5, doc.go: a 404 is followed by a resend "after a backoff
// wait"). An earlier version exempted the reconciler after a 404 because "its
// visits are its backoff". That holds for the first resend of a visit, not
// for the next ones: against a server failing every submit (500 before
// commit, so the result endpoint answers 404), one visit went submit,
// query, submit, query, submit back to back until maxAttempts, with no
// wait and no retry budget (the reconciler never consults it). A fleet of
// reconcilers after an outage multiplied its load on the struggling server
// by maxAttempts. Now a visit resends at most once at once and reschedules.
func TestReconcilerVisitResendsOnceThenReschedules(t *testing.T) {
	clk := &pollSignalClock{polled: make(chan struct{}, 1)}
	// Visits hours apart: a server (and client) window of a day.
	e := newEnv(t, clientOpts(idem.WithClock(clk), idem.WithKeyRetention(idem.KeyRetentionStripe)))
	clk.Clock = e.clock

	// A prepared operation nobody drove: the reconciler sends it.
	_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 100}))
	e.clock.Advance(time.Minute) // due
	runOnePass(t, e, clk)

	require.Len(t, e.submits("k"), 1, "one visit resent without any wait")
	require.Equal(t, 1, e.queries("k"))
	rec := e.record("k")
	require.Equal(t, journal.StateUnknown, rec.State)
	require.True(t, rec.NextDue.After(e.clock.Now()), "rescheduled, not due at once")
	require.Empty(t, e.clock.Sleeps(), "the reconciler never sleeps on an operation")

	// An operation that may have been sent: the visit asks first, resends
	// once after the 404, asks again, and reschedules.
	e.clock.Advance(2 * idem.DefaultReconcileMaxInterval)
	runOnePass(t, e, clk)
	require.Len(t, e.submits("k"), 2)
	require.Equal(t, 3, e.queries("k"))
	require.Zero(t, e.srv.Effects(scope, "k"))
	e.requireSameBytes("k")

	// Healthy again: the next visit settles it, once.
	e.srv.Reset() // no scripted faults left, nothing recorded
	e.clock.Advance(2 * idem.DefaultReconcileMaxInterval)
	runOnePass(t, e, clk)
	require.Equal(t, journal.StateSucceeded, e.record("k").State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// The reconciler's schedule doubles up to maxInterval. With a valid but
// huge maxInterval the doubling overflowed to a negative interval and
// rand.N panicked, killing the process, once an operation had some forty
// attempts.
func TestHugeReconcileMaxDoesNotPanic(t *testing.T) {
	e := newEnv(t, clientOpts(
		idem.WithReconcile(time.Hour, time.Duration(math.MaxInt64), 1000*time.Hour),
		idem.WithMaxAttempts(1)))
	_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	now := e.clock.Now()
	_, err = e.store.Update(e.ctx, idem.DefaultScope, "k", func(r *journal.Record) error {
		for i := 1; i <= 100; i++ {
			r.Attempts = append(r.Attempts, journal.Attempt{Number: i, Kind: journal.AttemptQuery, Start: now, Done: true})
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k"}))
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Unknown)
	require.True(t, e.record("k").NextDue.After(e.clock.Now()))
}
