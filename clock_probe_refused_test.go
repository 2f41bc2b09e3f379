package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) calls Resume at start-up before the API can be reached: its
// connections are refused (the provider's edge restarting, the restored
// VM's network not up yet: ECONNREFUSED, nothing sent). The HEAD asking the
// host's clock is refused at once like the resends; it taught nothing. Once
// the host is back, Run's first visits to it must not go on a clock nothing
// taught: a Stripe-like server forgot every key 50 minutes ago (by its own
// clock, RFC 9110 6.6.1's Date), so a resend is a second order. A probe
// refused was taken as over, and Run's first visits, its share of the
// host, went at once: 8 second orders of 40. The host is asked again
// before the next resend; its Date flags every key, none resent. Default
// settings but the clock.
func TestClockProbeRefusedAtStartUpIsAskedAgain(t *testing.T) {
	network := &outage{}
	network.mode.Store(netDown)
	clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
		network.base = base
		return network
	})
	_, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Positive(t, network.refused.Load(), "requests refused at start-up")
	lost := map[string]int{}
	for _, k := range keys {
		lost[k] = 1
	}
	require.Equal(t, lost, serverSubmits(t, srv), "submits per key while the host was unreachable: the lost one")
	require.Zero(t, serverHeads(t, srv), "clock probes that reached the host while it was unreachable")

	network.mode.Store(netUp)
	runFlagsEveryKey(t, clock, c, srv, store, keys, 1)
}

// runFlagsEveryKey runs c's Run until every one of keys, journaled by
// steppedBackHour and forgotten by srv, is flagged, and checks that each
// is flagged for one of reviews (ReviewClockStepped if none) and was never
// resent (one order each, its lost submit only), and that heads clock
// probes reached srv. Run flags them within seconds of clock; but one
// whose first pass finds the host still silent (its probe's attempt
// timeout not yet over by our clock: how many visits Resume left due
// before it gave up depends on the machine's load) takes the host for down
// and postpones its operations, up to the reconciler's longest interval:
// Run is given that much clock, stopped as soon as all are flagged.
func runFlagsEveryKey(t *testing.T, clock *idemtest.Clock, c *idem.Client, srv *idemtest.Server, store *journal.Store, keys []string, heads int, reviews ...string) {
	t.Helper()
	flagged := func() bool {
		for _, k := range keys {
			rec, err := store.Get(t.Context(), idem.DefaultScope, k)
			if err != nil || rec.Review == "" {
				return false
			}
		}
		return true
	}
	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	runUntilDone(t, e, clock.Now().Add(idem.DefaultReconcileMaxInterval+10*time.Minute), flagged)
	// Run goes on past the flagging for a while: a flagged key resent,
	// or probed again, on a later pass must still fail the counts below.
	runUntil(t, e, clock.Now().Add(time.Hour))
	lost := map[string]int{}
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		if len(reviews) == 0 {
			reviews = []string{idem.ReviewClockStepped}
		}
		require.Containsf(t, reviews, rec.Review, "review of %s", k)
		lost[k] = 1
	}
	require.Equal(t, lost, serverSubmits(t, srv), "submits per key: the lost one, no resend")
	require.Equal(t, heads, serverHeads(t, srv), "clock probes that reached the server")
}
