package idem_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// After an outage leaves hundreds of operations unknown, a restart's
// Resume settles every one of them at default settings: start-up
// reconciliation does not spend the retry budget that keeps callers'
// retries off a struggling server (it settled 48 of 1,000 when it did).
func TestResumeSettlesBacklogWithDefaultRetryBudget(t *testing.T) {
	const n = 300
	e := newEnv(t, serverOpts(idemtest.WithSeed(7), idemtest.WithProfile(idemtest.Profile{
		Rates: map[idemtest.FaultKind]float64{
			idemtest.DropAfterCommit:   0.5, // executed, answer lost
			idemtest.ErrorBeforeCommit: 0.5, // never executed
		},
	})))
	keys := make([]string, n)
	unknown := 0
	for i := range keys {
		keys[i] = fmt.Sprintf("outage-%03d", i)
		if _, err := e.client.Submit(e.ctx, e.req(keys[i], fmt.Sprintf(`{"order":%d}`, i))); err != nil {
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, keys[i])
			unknown++
		}
	}
	require.Greater(t, unknown, n/2, "left unknown by the outage")

	require.NoError(t, e.srv.SetProfile(idemtest.Profile{})) // the outage ends
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: unknown, Succeeded: unknown}, sum)
	for _, k := range keys {
		require.Equal(t, 1, e.srv.Effects(scope, k), k)
		e.requireSameBytes(k)
	}
}
