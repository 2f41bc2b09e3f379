package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// ignoredOrderRefusal is the charge endpoint's 409 about the order, in
// words (message), marked, as each of its answers is, as ignoring the key
// (Solidgate: "A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests). The words
// are modelled on order APIs' "Order ID already exists": the endpoint
// checks the order id, never the key.
func ignoredOrderRefusal(w http.ResponseWriter, message string) {
	w.Header().Set("Idempotency-Status", "ignored")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	_, _ = fmt.Fprintf(w, `{"error":{"message":%q}}`, message)
}

// chargesBehindSidecar is a keyIgnoringCharges endpoint behind a sidecar
// that retries an upstream 503 whatever the method (retryingSidecar:
// Istio's default; Envoy's retry_on 5xx, "Envoy will attempt a retry if
// the upstream server responds with any 5xx response code, or does not
// respond at all (disconnect/reset/read timeout)",
// https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/router_filter#x-envoy-retry-on).
// The first copy of idem's one request charges pay_1, and the pod's
// connection resets before its answer (podReset, which the sidecar
// retries); the sidecar's copy is refused (ignoredOrderRefusal), nothing
// charged: the 409 is all idem hears. Any later request charges (pay_n,
// answered 201). orders counts the charges.
type chargesBehindSidecar struct {
	*keyIgnoringCharges
	sidecar *httptest.Server

	mu     sync.Mutex
	orders int
}

func newChargesBehindSidecar(t *testing.T) *chargesBehindSidecar {
	return newChargesBehindSidecarSaying(t, "Order ID already exists")
}

// newChargesBehindSidecarSaying is newChargesBehindSidecar whose 409
// says message.
func newChargesBehindSidecarSaying(t *testing.T, message string) *chargesBehindSidecar {
	t.Helper()
	b := &chargesBehindSidecar{}
	b.keyIgnoringCharges = newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 2 {
			ignoredOrderRefusal(w, message)
			return
		}
		b.mu.Lock()
		b.orders++ // pay_n
		b.mu.Unlock()
		if n == 1 {
			podReset(w)
			return
		}
		ignoredCreated(n, w)
	})
	b.sidecar = retryingSidecar(t, b.srv.Config.Handler.ServeHTTP)
	return b
}

func (b *chargesBehindSidecar) requireOrders(t *testing.T, n int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Equal(t, n, b.orders, "orders charged")
}

// request is payment k of order o-1 through the sidecar; resultURL ""
// leaves it without a result endpoint.
func (b *chargesBehindSidecar) request(resultURL string) idem.Request {
	return idem.Request{Key: "k", URL: b.sidecar.URL + "/api/v1/charge", ResultURL: resultURL, Body: []byte(`{"amount":100,"order_id":"o-1"}`)}
}

func (b *chargesBehindSidecar) resultURL() string { return b.sidecar.URL + "/api/v1/orders/o-1" }

// requireFlagged checks that a Submit ended unknown, flagged
// ReviewKeyIgnored, after queries status queries: never failed (a copy of
// the request may have charged) nor a key conflict (the endpoint reads no
// key), and nothing more charged.
func (b *chargesBehindSidecar) requireFlagged(t *testing.T, res *idem.Result, err error, queries int) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed, "a copy of this request may have charged")
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "no other request holds a key the endpoint does not read")
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	b.requireOnce(t, res, queries)
}

// requireOnce checks that idem sent the payment once (the sidecar's two
// copies reached the endpoint), then queries status queries, and that
// one payment charged.
func (b *chargesBehindSidecar) requireOnce(t *testing.T, res *idem.Result, queries int) {
	t.Helper()
	require.Equal(t, 1+queries, res.Attempts, "exchanges: idem's one submit, then its queries")
	b.requireSeen(t, []string{"k", "k"}, queries)
	b.requireOrders(t, 1)
}

// An endpoint that ignores the key answers a first attempt 409 "Order ID
// already exists": the order it holds may be a copy of this very request
// (a sidecar retried it after the copy that charged lost its answer), and
// as the endpoint executes every copy, that one charged. Read as the
// endpoint's own refusal (TestKeyIgnoredEndpointsOwn409FailsThePayment's
// plain state conflict), the payment was failed with the 409's reason and
// the caller paid again under a new key: a second charge. The result
// endpoint is asked instead, never the charge endpoint again. Here it
// names pay_1, the order's payment: the copy's, but an answer about the
// order would name another request's payment of it alike
// (TestKeyIgnoredOrderPaidByAnotherRequestIsNotTakenAsOurs), so it is left
// for a person, the payment named. One request from idem, one charge, one
// status query.
func TestKeyIgnoredOrderExistsOnAFirstAttemptFoundIsLeftForAPerson(t *testing.T) {
	b := newChargesBehindSidecar(t)
	b.answerFrom(1, orderStatus("pay_1", "settled"))
	c := clientFor(t, b.sidecar, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), b.request(b.resultURL()))
	b.requireFlagged(t, res, err, 1)
	rec, err := c.Record(t.Context(), "", "k")
	require.NoError(t, err)
	require.Len(t, rec.Attempts, 2)
	require.Contains(t, rec.Attempts[1].Err, `"pay_1"`, "the payment found, for the person deciding")
}

// As above, but the result endpoint says the order's payment was declined
// (modelled): whoever tried it, nothing of ours charged. Settled failed,
// unflagged; one request, one status query.
func TestKeyIgnoredOrderExistsOnAFirstAttemptFoundDeclinedFails(t *testing.T) {
	b := newChargesBehindSidecar(t)
	b.answerFrom(1, orderStatus("pay_1", "failed"))
	c := clientFor(t, b.sidecar, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), b.request(b.resultURL()))
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)
	b.requireOnce(t, res, 1)
}

// As above, but the result endpoint has nothing for the order yet (its
// read path behind, modelled): nothing confirms whether the order the
// 409 names is this request's. Failed, the caller pays again; resent, the
// endpoint charges again. Left for a person: unknown, ReviewKeyIgnored,
// ErrNeedsReview; one request, no resend. A restart's Resume asks the
// result endpoint again and sends nothing to the charge endpoint.
func TestKeyIgnoredOrderExistsOnAFirstAttemptUnconfirmedIsFlagged(t *testing.T) {
	b := newChargesBehindSidecar(t)
	path := filepath.Join(t.TempDir(), "idem.journal")
	open := func() (*idem.Client, *journal.Store) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(b.sidecar.Client()), idem.WithClock(idemtest.NewClock(epoch)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
		return c, store
	}

	c, store := open()
	res, err := c.Submit(t.Context(), b.request(b.resultURL()))
	b.requireFlagged(t, res, err, 1)
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())

	c, _ = open()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "Resume: still for a person")
	b.requireSeen(t, []string{"k", "k"}, 2) // Resume's query, no submit
	b.requireOrders(t, 1)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review)
	require.Equal(t, 3, op.Attempts, "journal: the submit and two queries")
}

// Without a result endpoint nothing can confirm the order is this
// request's: flagged at once, unknown, ReviewKeyIgnored; one request.
// Whether the words say the order exists, is a duplicate or was paid.
func TestKeyIgnoredOrderExistsOnAFirstAttemptWithoutResultEndpointIsFlagged(t *testing.T) {
	for _, message := range []string{"Order ID already exists", "Duplicate order", "Order already paid"} {
		t.Run(message, func(t *testing.T) {
			b := newChargesBehindSidecarSaying(t, message)
			c := clientFor(t, b.sidecar, idemtest.NewClock(epoch))

			res, err := c.Submit(t.Context(), b.request(""))
			b.requireFlagged(t, res, err, 0)
		})
	}
}
