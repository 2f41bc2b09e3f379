package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An endpoint that ignores the key (Solidgate: "A value of ignored means
// the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) checks the
// order id: its 409 "Order already paid" to a first attempt may be about a
// copy of this request a proxy sent again, or about another request that
// paid the order under another key (a second payment of one order, a
// wallet top-up's order id sent twice). Its order status tells of the
// order, whoever paid it ("The check order status request helps to
// retrieve the present status of a given order",
// https://api-docs.solidgate.com/api/card-payments/get-status-card-order),
// in the same amount here: nothing in it says whose payment it is. Payment
// a paid order o-1 (pay_1); payment k of the same order is refused, and
// the status query names pay_1. k was settled succeeded with pay_1, a
// payment a had made and was settled with: one payment counted for two,
// the second never made. Left for a person instead: unknown,
// ReviewKeyIgnored (ErrNeedsReview, not ErrKeyConflict: the endpoint reads
// no key); one charge, each key sent once, one status query.
func TestKeyIgnoredOrderPaidByAnotherRequestIsNotTakenAsOurs(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			ignoredCreated(n, w) // payment a: pay_1
			return
		}
		ignoredOrderRefusal(w, "Order already paid")
	})
	s.answerFrom(1, orderStatus("pay_1", "settled"))
	c := clientFor(t, s.srv, idemtest.NewClock(epoch))
	pay := func(key string) idem.Request {
		return idem.Request{Key: key, URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
			Body: []byte(`{"amount":100,"order_id":"o-1"}`)}
	}

	res, err := c.Submit(t.Context(), pay("a"))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_1", res.ResourceID)

	res, err = c.Submit(t.Context(), pay("k"))
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "the endpoint reads no key")
	require.Equal(t, idem.StateUnknown, res.State, "pay_1 is a's: nothing says k paid")
	require.Empty(t, res.ResourceID)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	require.Equal(t, 2, res.Attempts, "k's one submit and one status query")
	s.requireSeen(t, []string{"a", "k"}, 1)

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review)
}
