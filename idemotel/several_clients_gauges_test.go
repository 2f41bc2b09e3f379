package idemotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestGaugesOfSeveralClientsAreTheirTotals: an Instrumentation "may serve
// several Clients" (a service with a payments journal and a payouts
// journal, each its own provider). Observe registered one callback per
// Client, each observing the gauges with no attributes, and the SDK keeps
// the last observation of an attribute set: the payouts Client's zeros
// hid the payments Client's flagged payment (a webhook naming a second
// order made with its key) and its unknown one, so neither the flagged
// alert nor the unknown-age alert could fire. The gauges are now the
// Clients' totals.
func TestGaugesOfSeveralClientsAreTheirTotals(t *testing.T) {
	payments := newFakeAPI(t)
	payouts := newFakeAPI(t)
	payouts.tel, payouts.clk = payments.tel, payments.clk // one Instrumentation, one clock
	pc, oc := payments.client(t), payouts.client(t)
	ctx := context.Background()

	// Settled, then contradicted by the provider's webhook: another order
	// under our key, a payment made twice.
	_, err := pc.Submit(ctx, idem.Request{Key: "paid", URL: payments.srv.URL + "/orders", Body: []byte(`{}`)})
	require.NoError(t, err)
	_, err = pc.Confirm(ctx, "", "paid", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_other",
		Source: "provider-webhook", EventID: "evt_1", At: payments.clk.Now()})
	require.ErrorIs(t, err, journal.ErrConfirmConflict)
	// Unknown: the provider answered 503 until the call's budget ran out.
	require.NoError(t, payments.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "stuck", Count: 1000}))
	_, err = pc.Submit(ctx, idem.Request{Key: "stuck", URL: payments.srv.URL + "/orders", Body: []byte(`{}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	stuck, err := pc.Record(ctx, "", "stuck")
	require.NoError(t, err)
	// The payouts Client has settled everything it did.
	_, err = oc.Submit(ctx, idem.Request{Key: "payout", URL: payouts.srv.URL + "/orders", Body: []byte(`{}`)})
	require.NoError(t, err)
	payments.clk.Advance(time.Hour)

	regPayments, err := payments.tel.inst.Observe(pc)
	require.NoError(t, err)
	regPayouts, err := payments.tel.inst.Observe(oc)
	require.NoError(t, err)
	want := map[string]map[string]float64{
		idemotel.MetricOpen:             {"": 1},
		idemotel.MetricUnknown:          {"": 1},
		idemotel.MetricFlagged:          {"": 1},
		idemotel.MetricOldestUnknownAge: {"": payments.clk.Now().Sub(stuck.Created).Seconds()},
	}
	requireGauges(t, payments.tel, want)

	// The same Client observed twice (a library's Observe and the
	// service's own) is counted once: its flagged payment is one.
	regAgain, err := payments.tel.inst.Observe(pc)
	require.NoError(t, err)
	requireGauges(t, payments.tel, want)
	require.NoError(t, regAgain.Unregister())
	requireGauges(t, payments.tel, want)

	require.NoError(t, regPayouts.Unregister())
	require.NoError(t, regPayouts.Unregister(), "a second Unregister")
	requireGauges(t, payments.tel, want)
	require.NoError(t, regPayments.Unregister())
	m := payments.tel.metrics(t)
	require.Empty(t, m[idemotel.MetricFlagged], "no Client observed")
}

func requireGauges(t *testing.T, tel *telemetry, want map[string]map[string]float64) {
	t.Helper()
	m := tel.metrics(t)
	for name, pts := range want {
		require.Equal(t, pts, m[name], name)
	}
}
