package idem_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

// openOnlyExchange is the fake server as an order API whose client order
// id is unique among open orders only (Binance's newClientOrderId, "a
// unique id among open orders"; KuCoin's clientOid): once a market order
// has filled, the same id places a second order. It returns the server
// and a client of it configured as the README says for such an API,
// whose requests go through wrap's transport (nil: the server's).
func openOnlyExchange(t *testing.T, clock *idemtest.Clock, wrap func(http.RoundTripper) http.RoundTripper, faults ...idemtest.Fault) (*idemtest.Server, *idem.Client) {
	t.Helper()
	srv, opts := openOnlyServer(t, clock, clock, wrap, faults...)
	c, err := idem.Open(filepath.Join(t.TempDir(), "j"), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return srv, c
}

// openOnlyServer is openOnlyExchange's server, on the clock shared, and
// the options of a client of it on clk (which a test may step apart from
// shared), for a test that opens the client itself.
func openOnlyServer(t *testing.T, shared *idemtest.Clock, clk idem.Clock, wrap func(http.RoundTripper) http.RoundTripper, faults ...idemtest.Fault) (*idemtest.Server, []idem.Option) {
	t.Helper()
	b := idemtest.ClientOrderID()
	b.OpenOnly = true
	srv := newServer(t, idemtest.WithClock(shared.Now), idemtest.WithBehavior(b))
	for _, f := range faults {
		require.NoError(t, srv.Inject(f))
	}
	hc := srv.Client()
	if wrap != nil {
		hc = &http.Client{Transport: wrap(hc.Transport)}
	}
	return srv, append([]idem.Option{idem.WithHTTPClient(hc), idem.WithClock(clk), idem.WithResultEndpoint(srv.ResultTemplate())},
		crashtest.BehaviorOptions(b)...)
}

// loseFirst wraps a transport in crashtest.LoseFirstOrder.
func loseFirst(rt http.RoundTripper) http.RoundTripper { return &crashtest.LoseFirstOrder{Base: rt} }

// requireResume runs Resume and asserts its summary.
func requireResume(t *testing.T, c *idem.Client, want idem.Summary) {
	t.Helper()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, want, sum)
}

// requireOrders asserts the server's submits and queries of key, each
// carrying it, and the orders it placed for it.
func requireOrders(t *testing.T, srv *idemtest.Server, key string, submits, effects int) {
	t.Helper()
	n := 0
	for _, r := range srv.Requests() {
		require.Equal(t, key, r.Key, "%s %s carries the key", r.Method, r.Path)
		if r.Method == http.MethodPost {
			n++
		}
	}
	require.Equal(t, submits, n, "submits")
	st := srv.KeyStats("", key)
	require.Equal(t, effects, st.Effects, "orders placed")
	require.Zero(t, st.SubmitsAfterFinal+st.Refusals, "nothing sent again once placed: %+v", st)
}

// Binance answers its GET order with -2013 "Order does not exist." for
// an order it has placed, for up to about a minute (dev.binance.vision,
// "FAQ: Error message Order does not exist"; 22 s and 62 s measured by
// Mike-Mercer/Binance-REST-Test): its read path lags its matching
// engine. idem took the first -2013 after a lost answer for an order
// never placed and resent at once; the market order had filled, its id
// was free, and the resend placed a second order. With the key in the
// body, a "not found" within DefaultResultLag of the last send is asked
// again, never resent: the call ends unknown with one order, and Resume,
// once the read path has caught up, finds that order.
func TestLaggingNotFoundIsNotAnOrderNeverPlaced(t *testing.T) {
	clock := idemtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	key := crashtest.Key(1)
	srv, c := openOnlyExchange(t, clock, loseFirst,
		idemtest.Fault{Kind: idemtest.QueryLag, Key: key, Delay: 62 * time.Second})

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(1)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)
	// The order, then a query for each attempt the call had left.
	require.Len(t, srv.Requests(), idem.DefaultMaxAttempts)
	requireOrders(t, srv, key, 1, 1)

	clock.Advance(idem.DefaultResultLag)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, "1", op.Result.ResourceID, "the order placed first")
	require.Len(t, srv.Requests(), idem.DefaultMaxAttempts+1)
	requireOrders(t, srv, key, 1, 1)
}

// An order the exchange never placed (a 500 before anything was
// committed, which says nothing of the order: Binance's -1001 "Internal
// error", its execution status unknown) is not found by any query. It
// is not resent while the read path may lag (a Resume half a minute
// later asks again and sends nothing), and once DefaultResultLag has
// passed it is resent once: one order.
func TestOrderNeverPlacedIsResentOnceTheResultLagHasPassed(t *testing.T) {
	clock := idemtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	key := crashtest.Key(1)
	srv, c := openOnlyExchange(t, clock, nil, idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: key})
	requireUnknownAndOnlyAskedWithinTheLag(t, c, srv, clock, key, 0)

	clock.Advance(idem.DefaultResultLag)
	requireResume(t, c, idem.Summary{Visited: 1, Succeeded: 1})
	requireOrders(t, srv, key, 2, 1)
}

// A VM's clock ran five minutes slow when the order was sent (its answer
// lost), and was stepped right as the VM rebooted (chrony's makestep,
// ntpd -g): by the journal the send is over five minutes old, though
// Binance's read path, up to about a minute behind (dev.binance.vision
// FAQ), still answers -2013 for the filled order 25 s later. The
// restarted process took the lag for over and resent: two orders. How
// wrong the crashed process's clock read is not known, so its sends
// count from the restart at the earliest: Resume then only asks, and once
// the lag has passed since the restart the order is found, one order.
func TestLagFromASlowClockSteppedRightAtRestart(t *testing.T) {
	shared := idemtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	clk := &skewedClock{Clock: shared}
	clk.offset.Store(int64(-5 * time.Minute))
	srv, key, reopen := crashedWithALostOrder(t, shared, clk)

	clk.offset.Store(0)
	shared.Advance(20 * time.Second)
	c := reopen()
	requireResume(t, c, idem.Summary{Visited: 1, Unknown: 1})
	requireOrders(t, srv, key, 1, 1)

	shared.Advance(idem.DefaultResultLag)
	requireFirstOrderFound(t, c, srv, key)
}

// requireUnknownAndOnlyAskedWithinTheLag submits the order of key, which
// must end unknown after one send, and runs Resume half a minute later,
// within DefaultResultLag: it must only ask. orders is what the server
// placed for it.
func requireUnknownAndOnlyAskedWithinTheLag(t *testing.T, c *idem.Client, srv *idemtest.Server, clock *idemtest.Clock, key string, orders int) {
	t.Helper()
	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(1)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)
	requireOrders(t, srv, key, 1, orders)

	clock.Advance(30 * time.Second)
	requireResume(t, c, idem.Summary{Visited: 1, Unknown: 1})
	requireOrders(t, srv, key, 1, orders)
}

// crashedWithALostOrder is a process, on clk, that sent an order to an
// openOnlyServer on shared (its answer lost, the read path a minute
// behind: Binance's GET order answers -2013 for it) and stopped with it
// unknown. reopen opens the journal again, as the restarted process.
func crashedWithALostOrder(t *testing.T, shared *idemtest.Clock, clk idem.Clock) (srv *idemtest.Server, key string, reopen func() *idem.Client) {
	t.Helper()
	key = crashtest.Key(1)
	srv, opts := openOnlyServer(t, shared, clk, loseFirst, idemtest.Fault{Kind: idemtest.QueryLag, Key: key, Delay: 62 * time.Second})
	path := filepath.Join(t.TempDir(), "j")
	c, err := idem.Open(path, opts...)
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(1)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NoError(t, c.Close())
	requireOrders(t, srv, key, 1, 1)
	return srv, key, func() *idem.Client {
		c, err := idem.Open(path, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

// requireFirstOrderFound runs Resume, which must find the order placed
// first for key, and that one only.
func requireFirstOrderFound(t *testing.T, c *idem.Client, srv *idemtest.Server, key string) {
	t.Helper()
	requireResume(t, c, idem.Summary{Visited: 1, Succeeded: 1})
	op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, "1", op.Result.ResourceID, "the order placed first")
	requireOrders(t, srv, key, 1, 1)
}
