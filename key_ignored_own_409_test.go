package idem_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// ignoredStateConflict is the charge endpoint refusing a payment with its
// own 409, marked, as each of its answers is, as ignoring the key
// (Solidgate: "A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests). The body is
// modelled on Solidgate's error object; the status on RFC 9110's 409
// (15.5.10): "the request could not be completed due to a conflict with
// the target resource's current state" (the order's state allows no
// payment): nothing charged. Not words saying the order exists or was
// paid, which a copy of this request may have done
// (key_ignored_409_order_exists_test.go).
func ignoredStateConflict(w http.ResponseWriter) {
	w.Header().Set("Idempotency-Status", "ignored")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	_, _ = fmt.Fprint(w, `{"error":{"code":"2.09","message":"Order status does not allow this operation"}}`)
}

// An endpoint that does not read the key cannot answer about it: its 409
// is no request holding the key, in flight or done, but its refusal of
// this one. idem read it as another request's in flight (the default
// classifier's 409) and resent: the resend charged (pay_2, 201 marked
// ignored) and Submit settled it succeeded, unflagged, an order the
// endpoint had refused for its state paid all the same. (Had the resend's
// answer been garbled, the query's success was read as the other
// request's: unknown, ErrKeyConflict; TestKeyIgnoredEndpointsOwn409IsNoKeyConflict
// in internal/crashtest.) Refused, it fails with the server's reason: one
// request, no charge, no query, no key conflict.
func TestKeyIgnoredEndpointsOwn409FailsThePayment(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			ignoredStateConflict(w)
			return
		}
		ignoredCreated(n, w)
	})
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "no other request holds a key the endpoint does not read")
	require.Equal(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)
	require.Contains(t, res.Reason, "Order status does not allow this operation")
	s.requireSeen(t, []string{"k"}, 0)

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, op.State)
	require.Equal(t, 1, op.Attempts, "journal: the one refused send")
}

// After a send that may have executed, the endpoint's own 409 proves
// nothing of that send: a gateway in front of the charge endpoint
// (modelled: its 502 carries none of the endpoint's headers) answered the
// first request, which the endpoint may have charged, and the resend,
// after the status endpoint found nothing yet, is refused for the order's
// state (perhaps the state that first request left). Failed, the caller
// would pay again under a new key; resent, the endpoint would charge
// again. Flagged for a person, never resent: two requests, no third. (A
// pin of the rule's second half: the first half, a first attempt's 409
// failed, is TestKeyIgnoredEndpointsOwn409FailsThePayment.)
func TestKeyIgnoredEndpointsOwn409AfterAMaybeExecutedSendIsFlagged(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			http.Error(w, "Bad Gateway", http.StatusBadGateway)
			return
		}
		ignoredStateConflict(w)
	})
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.NotErrorIs(t, err, idem.ErrFailed, "the first request may have charged")
	require.NotErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	s.requireSeen(t, []string{"k", "k"}, 2)

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review)
	require.Equal(t, 4, op.Attempts, "journal: the charge, a query, the refused resend, a query")
}
