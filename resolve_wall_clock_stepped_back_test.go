package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A resolution is timed after the one before it, so that an operator's
// double-submit on a coarse or manual clock tells its own commit from
// its twin's. A wall clock stepped an hour ahead, then put back by NTP,
// pinned every later resolution's At to the bad reading plus a few
// nanoseconds, until the process restarted: the audit trail said each
// was made an hour from now. A reading more than a second behind the
// last is the clock's, taken as it is.
func TestResolveAfterWallClockSteppedBackTakesTheClocksReading(t *testing.T) {
	clk := &skewedClock{}
	e := newEnv(t, clientOpts(idem.WithClock(clk)))
	clk.Clock = e.clock
	for _, k := range []string{"a", "b"} {
		_, err := e.client.Prepare(e.ctx, e.req(k, `{}`))
		require.NoError(t, err)
	}
	resolution := idem.Resolution{State: idem.StateFailed, Reason: "cancelled by the customer", By: "alice"}

	clk.offset.Store(int64(time.Hour))
	_, err := e.client.Resolve(e.ctx, "", "a", resolution)
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Add(time.Hour), e.record("a").Resolved.At.In(time.UTC), "a: At")

	clk.offset.Store(0) // NTP corrects the clock
	e.clock.Advance(time.Minute)
	_, err = e.client.Resolve(e.ctx, "", "b", resolution)
	require.NoError(t, err)
	require.Equal(t, e.clock.Now(), e.record("b").Resolved.At.In(time.UTC), "b: At")
	require.Zero(t, e.srv.Effects(scope, "a")+e.srv.Effects(scope, "b"), "orders")
}
