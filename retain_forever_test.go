package idem_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A retention too long to double (math.MaxInt64: "keep them forever")
// must not make Run's start-up prune, which cuts off at twice the
// retention, overflow into a cut-off in the future: every settled
// operation would be pruned at once, and a request resubmitted with its
// key sent again as a new order.
func TestRunStartUpPruneWithRetentionTooLongToDouble(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithRetainSettled(math.MaxInt64)))
	const body = `{"amount":100}`
	_, err := e.client.Submit(e.ctx, e.req("k", body))
	require.NoError(t, err)
	e.clock.Advance(time.Minute)

	runUntil(t, e, e.clock.Now().Add(10*time.Minute))
	_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "k")
	require.NoError(t, err, "settled 11 minutes ago, retained forever")
	res, err := e.client.Submit(e.ctx, e.req("k", body))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Len(t, e.submits("k"), 1, "submits that reached the server")
}
