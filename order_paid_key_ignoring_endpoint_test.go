package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// unmarkedPaidRefusal is the charge endpoint's refusal of a payment of
// an order paid already, in status, answered without the endpoint's
// Idempotency-Status: a layer in front of its idempotency middleware
// (an order check, a gateway's validation) answers before the
// middleware marks the answer (modelled: Solidgate's endpoint marks what
// it answers, "Send the request with an Idempotency-Key header and check
// the Idempotency-Status value. A value of ignored means the endpoint
// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests,
// and nothing says an error from in front of it is marked).
func unmarkedPaidRefusal(status int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"code":"ORDER_ALREADY_PAID","message":"Order already paid"}}`)
	}
}

// solidgatePay is a payment of order under key to s's charge endpoint,
// its result asked of the order's status.
func solidgatePay(s *keyIgnoringCharges, key, order string) idem.Request {
	return idem.Request{Key: key, URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/" + order,
		Body: []byte(fmt.Sprintf(`{"amount":100,"order_id":%q}`, order))}
}

// requireKeyIgnoredOpen asserts k unknown, flagged ReviewKeyIgnored, no
// payment recorded as its.
func requireKeyIgnoredOpen(t *testing.T, c *idem.Client) {
	t.Helper()
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State, "nothing says k paid, nor that it did not")
	require.Equal(t, idem.ReviewKeyIgnored, op.Review)
	if op.Result != nil {
		require.Empty(t, op.Result.ResourceID)
	}
}

// An endpoint known to ignore the key (payment a's 201 marked ignored)
// refuses payment k of the same order "Order already paid", unmarked
// (unmarkedPaidRefusal). Read as from a server that keeps the key, the
// result endpoint's answer was taken as about k's key: the order status
// naming a's pay_1 settled k succeeded with it, one payment counted for
// two (as TestKeyIgnoredOrderPaidByAnotherRequestIsNotTakenAsOurs guards
// for the marked 409); its "not found" failed k once past the lag, though
// a copy of k a mesh sent may have paid there, the endpoint executing
// every copy. The endpoint is known not to read the key, so the refusal
// is the order's, whoever paid it (copyClaimed): unknown, ReviewKeyIgnored,
// for a person; one charge, each key sent once.
func TestOrderPaidFromAnEndpointKnownToIgnoreTheKey(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusBadRequest} {
		answer := func(n int, w http.ResponseWriter) {
			if n == 1 {
				ignoredCreated(n, w) // payment a: pay_1
				return
			}
			unmarkedPaidRefusal(status)(w)
		}
		t.Run(fmt.Sprint(status, " order status names a's payment"), func(t *testing.T) {
			s := newKeyIgnoringCharges(t, answer)
			s.answerFrom(1, orderStatus("pay_1", "settled"))
			c := clientFor(t, s.srv, idemtest.NewClock(epoch))
			_, err := c.Submit(t.Context(), solidgatePay(s, "a", "o-1"))
			require.NoError(t, err)

			res, err := c.Submit(t.Context(), solidgatePay(s, "k", "o-1"))
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.NotErrorIs(t, err, idem.ErrKeyConflict, "the endpoint reads no key")
			require.Equal(t, idem.StateUnknown, res.State)
			require.Empty(t, res.ResourceID)
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			requireKeyIgnoredOpen(t, c)
			s.requireSeen(t, []string{"a", "k"}, 1)
		})
		t.Run(fmt.Sprint(status, " order status not found"), func(t *testing.T) {
			s := newKeyIgnoringCharges(t, answer)
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, s.srv, clock)
			_, err := c.Submit(t.Context(), solidgatePay(s, "a", "o-1"))
			require.NoError(t, err)

			res, err := c.Submit(t.Context(), solidgatePay(s, "k", "o-1"))
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.StateUnknown, res.State)
			clock.Advance(idem.DefaultResultLag + time.Minute)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			requireKeyIgnoredOpen(t, c)
			s.requireSeen(t, []string{"a", "k"}, 2)
		})
	}
}

// Payment k's "Order already paid", unmarked, comes first: read as from a
// server that keeps the key, k is left unknown, ReviewRefusedAfterSend,
// its result endpoint to ask by the key. Payment b of another order then
// teaches that the endpoint ignores the key (its 201 marked ignored): the
// result endpoint's answer is about the order, not k's key. Resume took
// the order status naming pay_1 (another request's payment of o-1) as
// k's and settled k succeeded; its "not found" past the lag failed k,
// though a copy of k may have paid. Left for a person, ReviewKeyIgnored;
// k sent once, b once, nothing resent by Resume.
func TestOrderPaidBeforeTheEndpointWasLearntToIgnoreTheKey(t *testing.T) {
	answer := func(n int, w http.ResponseWriter) {
		if n == 1 {
			unmarkedPaidRefusal(http.StatusConflict)(w) // k
			return
		}
		ignoredCreated(n, w) // b: pay_2
	}
	for _, found := range []bool{true, false} {
		t.Run(fmt.Sprint("found ", found), func(t *testing.T) {
			s := newKeyIgnoringCharges(t, answer)
			if found {
				s.answerFrom(2, orderStatus("pay_1", "settled")) // k's own call hears "not found"
			}
			clock := idemtest.NewClock(epoch)
			c := clientFor(t, s.srv, clock)

			res, err := c.Submit(t.Context(), solidgatePay(s, "k", "o-1"))
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
			res, err = c.Submit(t.Context(), solidgatePay(s, "b", "o-2"))
			require.NoError(t, err)
			require.Equal(t, "pay_2", res.ResourceID)

			clock.Advance(idem.DefaultResultLag + time.Minute)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)
			requireKeyIgnoredOpen(t, c)
			s.requireSeen(t, []string{"k", "b"}, 2)
		})
	}
}
