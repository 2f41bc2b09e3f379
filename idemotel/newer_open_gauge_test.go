package idemotel_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestNewerOpenGauge: after a rollback, an open operation written by a
// newer idem is settled by no one until that idem runs again, and no
// gauge showed it (the open gauge counts only what this build reads):
// the newer-open gauge counts it, and not a settled one, which Prune
// keeps until the upgrade and which needs no one.
func TestNewerOpenGauge(t *testing.T) {
	tel := newTelemetry(t, idemtest.NewClock(epoch))
	c := rolledBack(t, "idem.journal", []string{"open", "newer-open", "newer-settled"}, "newer-settled", "newer-open", "newer-settled")
	reg, err := tel.inst.Observe(c)
	require.NoError(t, err)
	defer reg.Unregister()
	m := tel.metrics(t)
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricOpen])
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricNewerOpen])

	// As the other gauges (TestGaugesOfSeveralClientsAreTheirTotals):
	// the total of several Clients, a Client observed twice counted once.
	reg2, err := tel.inst.Observe(rolledBack(t, "payouts.journal", []string{"payout"}, "", "payout"))
	require.NoError(t, err)
	defer reg2.Unregister()
	again, err := tel.inst.Observe(c)
	require.NoError(t, err)
	defer again.Unregister()
	m = tel.metrics(t)
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricOpen])
	require.Equal(t, map[string]float64{"": 2}, m[idemotel.MetricNewerOpen])
}

// rolledBack opens a Client on a new journal named name holding keys,
// pending except settled (failed; none when ""), with those of newer made
// records a newer idem wrote, as a rollback leaves them.
func rolledBack(t *testing.T, name string, keys []string, settled string, newer ...string) *idem.Client {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), name)
	s, err := journal.Open(path)
	require.NoError(t, err)
	for _, k := range keys {
		_, err := s.Create(ctx, journaltest.NewRecord(idem.DefaultScope, k, time.Time{}))
		require.NoError(t, err)
	}
	if settled != "" {
		_, err = s.Update(ctx, idem.DefaultScope, settled, func(r *journal.Record) error {
			r.State, r.Settled = journal.StateFailed, r.Created
			r.Result = &journal.Result{StatusCode: 422, Reason: "declined"}
			return nil
		})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	journaltest.MakeNewer(t, path, idem.DefaultScope, newer...)
	c, err := idem.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}
