package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// defaultClientOf is a client of srv at the default settings: only its
// HTTP client, the clock it shares with srv and srv's result endpoint.
func defaultClientOf(t *testing.T, srv *idemtest.Server, clock *idemtest.Clock) *idem.Client {
	t.Helper()
	return journaledClient(t, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock), idem.WithResultEndpoint(srv.ResultTemplate()))
}

// faultedServer is an idemtest server on clock with f injected.
func faultedServer(t *testing.T, clock *idemtest.Clock, f idemtest.Fault) *idemtest.Server {
	t.Helper()
	srv := newServer(t, idemtest.WithClock(clock.Now))
	require.NoError(t, srv.Inject(f))
	return srv
}

// Stripe keeps a request running past a client's timeout: a resend with
// the key meanwhile gets 409 idempotency_key_in_use ("another in-progress
// request using this Idempotent Key",
// https://docs.stripe.com/error-codes#idempotency-key-in-use) and nothing
// can be read of it until it commits. idem's first attempt times out (the
// default 10 s), the result endpoint does not know the key, the resend
// gets the 409: ours in flight, waited for and asked about, never failed
// nor resent into a second order; the call's budget ends with it
// processing (ErrUnknownOutcome). Once the request has committed, a
// minute later by the server's clock, Resume finds it: succeeded, the one
// order.
func TestRequestStillRunningAtTheResendIsWaitedFor(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv := faultedServer(t, clock, idemtest.Fault{Kind: idemtest.StillRunning, Key: "k", Delay: time.Minute})
	c := defaultClientOf(t, srv, clock)

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrBudgetSpent)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateProcessing, res.State)
	require.Empty(t, res.Review)
	require.Equal(t, []int{http.StatusConflict}, submitStatuses(srv)[1:], "the resend met the request still running")
	requireOneOrder(t, srv, "k")

	clock.Advance(time.Minute)
	requireResume(t, c, idem.Summary{Visited: 1, Succeeded: 1})
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, "ord_000001", op.Result.ResourceID)
	require.Len(t, submitStatuses(srv), 2, "Resume asked, sent nothing")
	requireOneOrder(t, srv, "k")
}

// submitStatuses returns the status of each submit srv received, in order
// (0 for one dropped).
func submitStatuses(srv *idemtest.Server) []int {
	var statuses []int
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost {
			statuses = append(statuses, r.Status)
		}
	}
	return statuses
}

// requireOneOrder asserts one order for key and every request carrying
// the key.
func requireOneOrder(t *testing.T, srv *idemtest.Server, key string) {
	t.Helper()
	for _, r := range srv.Requests() {
		require.Equal(t, key, r.Key, "%s %s carries the key", r.Method, r.Path)
	}
	require.Equal(t, 1, srv.Effects("", key), "orders")
	require.Equal(t, 1, srv.Stats().SideEffects)
}
