package idem_test

import (
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
