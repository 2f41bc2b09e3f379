package idem_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// skewedClock is the client's clock: the shared one plus an offset that a
// test steps, as NTP steps a wrong clock.
type skewedClock struct {
	*idemtest.Clock
	offset atomic.Int64 // nanoseconds
}

func (c *skewedClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.offset.Load())) }
func (c *skewedClock) Sleep(ctx context.Context, d time.Duration) error {
	return c.Clock.Sleep(ctx, d)
}

// An operation first sent while the client's clock ran 2 h fast has its
// FirstSent in the future once the clock is corrected. Its age cannot be
// measured, so it is never resent on it: the server may have forgotten the
// key (a resend would then charge twice).
func TestClockSteppedBackNeverResends(t *testing.T) {
	for _, withResult := range []bool{true, false} {
		name := "result endpoint"
		if !withResult {
			name = "replay only"
		}
		t.Run(name, func(t *testing.T) {
			clk := &skewedClock{}
			opts := []envOption{serverOpts(idemtest.WithRetention(idem.KeyRetentionFiber)),
				clientOpts(idem.WithClock(clk), idem.WithMaxAttempts(1))}
			if !withResult {
				opts = append(opts, noResultEndpoint())
			}
			e := newEnv(t, opts...)
			clk.Clock = e.clock
			clk.offset.Store(int64(2 * time.Hour))
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			clk.offset.Store(0)        // NTP corrects the clock
			e.clock.Advance(time.Hour) // the server forgot the key half an hour ago
			e.srv.Reset()              // and so the result endpoint knows nothing
			for range 3 {              // not now, and not once the clock has caught up
				e.restart()
				sum, err := e.client.Resume(e.ctx)
				require.NoError(t, err)
				require.Equal(t, 1, sum.Review)
				require.Equal(t, idem.ReviewClockStepped, e.record("k").Review)
				e.clock.Advance(45 * time.Minute)
			}
			require.Empty(t, e.submits("k"), "resent a key whose age could not be measured")
			require.Zero(t, e.srv.Effects(scope, "k"))
		})
	}
}

// An operation handed to the reconciler while the client's clock ran two
// days fast is due, by the corrected clock, two days late: Run must not
// leave it that long. Here the server refused every connection, so the
// order was never sent; once the server is back Run sends it, once, in
// its first hour, not in its third day.
func TestRunVisitsOperationsScheduledBeforeClockSteppedBack(t *testing.T) {
	clk := &skewedClock{}
	settled := make(chan time.Time, 1)
	refused := step{err: dialRefused}
	e := newEnv(t, script(refused, refused, refused, refused, refused),
		clientOpts(idem.WithClock(clk), idem.WithSettleFunc(func(*idem.Result) { settled <- clk.Now() })))
	clk.Clock = e.clock
	clk.offset.Store(int64(48 * time.Hour))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StatePending, res.State, "the server refused every connection: never sent")

	clk.offset.Store(0) // NTP corrects the clock; the server is back
	start := clk.Now()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ran := runAsync(ctx, e.client)
	at := within(t, settled, "Run settling the operation")
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
	require.Less(t, at.Sub(start), idem.DefaultReconcileMaxInterval,
		"Run settled the operation %v after the clock was corrected", at.Sub(start))
	require.Equal(t, idem.StateSucceeded, e.record("k").State)
	require.Len(t, e.submits("k"), 1, "submits that reached the server")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
}
