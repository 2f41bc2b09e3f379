package idem_test

import (
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// restartingHost is a host restarting when the client starts (modelled
// on a server process not yet listening on its port): its connections
// are refused (ECONNREFUSED, nothing sent) while clock reads no later
// than until, and taken once it has moved past: the host is back by the
// end of the first backoff.
type restartingHost struct {
	base    http.RoundTripper
	clock   *idemtest.Clock
	until   time.Time
	refused atomic.Int32
}

func (h *restartingHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.clock.Now().After(h.until) {
		return h.base.RoundTrip(r)
	}
	if r.Body != nil {
		_ = r.Body.Close()
	}
	h.refused.Add(1)
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) resends an order an earlier process sent, whose answer was
// lost, while the API's host restarts: its first requests are refused at
// once. The server is Stripe-like: "You can remove keys from the system
// automatically after they're at least 24 hours old. We generate a new
// request if a key is reused after the original is pruned"
// (docs.stripe.com/idempotency; the fake keeps them the default window, 20
// minutes), and it forgot the key 50 minutes ago by its own clock, which
// its answers' Date gives (RFC 9110 6.6.1). The HEAD asking the host's
// clock was refused and taught nothing, and the drive went on by our clock
// alone: its resend was refused as well, but the next, after the backoff,
// found the host back and was a second order (2 for old00), by a caller's
// Submit and by Resume alike, whose later resends never asked the clock
// again. Run's next visit asked again, but each visit still resent by our
// clock alone right after its refused probe (refused too, journaled: 2
// attempts), which a host back a moment sooner would have taken. A resend
// whose host's probe got no answer is not sent: the caller waits its
// backoff and asks the host's clock again, whose Date flags the key;
// Resume and Run hand it off, and their next visit asks. Default settings
// but the clock.
func TestClockProbeRefusedHoldsTheResendsAfterIt(t *testing.T) {
	for _, mode := range []string{"Submit", "Resume", "Run"} {
		t.Run(mode, func(t *testing.T) {
			clock, srv, path, keys := stripeBacklog(t, "old", 1)
			clock.Advance(70 * time.Minute)
			clk := &skewedClock{Clock: clock}
			clk.offset.Store(int64(-time.Hour))
			network := &restartingHost{base: srv.Client().Transport, clock: clock, until: clock.Now()}
			store, c := openOn(t, path, network, clk)

			var submitted error
			switch mode {
			case "Submit":
				_, submitted = c.Submit(t.Context(), idem.Request{Key: keys[0], URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
			case "Resume":
				_, err := c.Resume(t.Context())
				require.NoError(t, err)
				require.Equal(t, 1, srv.Effects("", keys[0]), "orders for old00 once Resume is done")
				clock.Advance(time.Minute)
				_, err = c.Resume(t.Context())
				require.NoError(t, err)
			case "Run":
				runFlagsEveryKey(t, clock, c, srv, store, keys, 1)
			}

			require.Positive(t, network.refused.Load(), "requests refused while the host restarted")
			rec, err := store.Get(t.Context(), idem.DefaultScope, keys[0])
			require.NoError(t, err)
			require.Equal(t, 1, srv.Effects("", keys[0]), "orders for old00")
			require.Equal(t, idem.StateUnknown, rec.State)
			require.Equal(t, idem.ReviewClockStepped, rec.Review)
			require.Len(t, rec.Attempts, 1, "attempts of old00: the lost one")
			require.Equal(t, map[string]int{keys[0]: 1}, serverSubmits(t, srv), "submits per key: the lost one, no resend")
			require.Equal(t, 1, serverHeads(t, srv), "clock probes that reached the server")
			if mode == "Submit" {
				require.ErrorIs(t, submitted, idem.ErrNeedsReview)
			}
		})
	}
}

// As above, a caller's Submit of the lost order, to a host that stays
// down: each round asks the host's clock, refused, in place of the
// resend, and counts as the attempt it stands in for. The call ends
// unknown after DefaultMaxAttempts of them, as it did after as many
// refused resends, none of which is sent by our clock alone.
func TestClockProbeRefusedForGoodEndsTheCallUnsent(t *testing.T) {
	clock, srv, path, keys := stripeBacklog(t, "old", 1)
	clock.Advance(70 * time.Minute)
	clk := &skewedClock{Clock: clock}
	clk.offset.Store(int64(-time.Hour))
	network := &restartingHost{base: srv.Client().Transport, clock: clock, until: clock.Now().Add(24 * time.Hour)}
	store, c := openOn(t, path, network, clk)

	_, err := c.Submit(t.Context(), idem.Request{Key: keys[0], URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrBudgetSpent)
	require.ErrorContains(t, err, "5 of its attempts were clock probes the host refused", "an error that says the attempts asked the clock, not that it sent 5 times")
	require.EqualValues(t, idem.DefaultMaxAttempts, network.refused.Load(), "requests refused: a clock probe per attempt")
	requireHeldUnknown(t, srv, store, keys)
	require.Zero(t, serverHeads(t, srv), "clock probes that reached the server")
}

// As above, Resume at start-up with 40 lost orders (steppedBackHour)
// while the host restarts: the visits behind the refused probe went on
// by our clock alone, their resends refused too, and backed off, by
// which time the host was back and took the next resends as second
// orders. Each visit is handed off; Run, once the host is back, asks its
// clock once and flags every key.
func TestClockProbeRefusedHoldsResumesVisitsBehindIt(t *testing.T) {
	var network *restartingHost
	clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
		network = &restartingHost{base: base}
		return network
	})
	network.clock, network.until = clock, clock.Now()
	_, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Positive(t, network.refused.Load(), "requests refused while the host restarted")
	for _, k := range keys {
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s once Resume is done", k)
	}

	runFlagsEveryKey(t, clock, c, srv, store, keys, 1)
}
