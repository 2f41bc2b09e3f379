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
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	for _, k := range []string{"open", "newer-open", "newer-settled"} {
		_, err := s.Create(ctx, journaltest.NewRecord(idem.DefaultScope, k, time.Time{}))
		require.NoError(t, err)
	}
	_, err = s.Update(ctx, idem.DefaultScope, "newer-settled", func(r *journal.Record) error {
		r.State, r.Settled = journal.StateFailed, r.Created
		r.Result = &journal.Result{StatusCode: 422, Reason: "declined"}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	journaltest.MakeNewer(t, path, idem.DefaultScope, "newer-open", "newer-settled")

	tel := newTelemetry(t, idemtest.NewClock(epoch))
	c, err := idem.Open(path)
	require.NoError(t, err)
	defer c.Close()
	reg, err := tel.inst.Observe(c)
	require.NoError(t, err)
	defer reg.Unregister()
	m := tel.metrics(t)
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricOpen])
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricNewerOpen])
}
