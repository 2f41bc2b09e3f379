package idem_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// orderExistsWords are a create's 409 refusals of an order whose
// reference the server holds already. Paxos answers Create Order "called
// with an already-used ref_id" 409, title "Already Exists", its meta
// naming "the existing order with the same ref_id", and says it "may be
// benign if the client is retrying an earlier attempted operation which
// the client believes may have failed"
// (https://docs.paxos.com/api-reference/problems/already-exists); Gett's
// ORDER_ALREADY_PLACED is a 409 under an Idempotency-Key for a cart
// "already turned into a placed order"
// (https://developer.gett-tech.com/errors/ORDER_ALREADY_PLACED). The
// words below, and a server that keeps an Idempotency-Key header besides
// and checks the order's reference before it (paidOrderServer with
// orderFirst), are modelled.
var orderExistsWords = []struct{ name, body, words string }{
	{"exists", `{"error":{"code":"ORDER_ALREADY_EXISTS","message":"Order already exists"}}`, "Order already exists"},
	{"duplicate", `{"error":{"code":"DUPLICATE_ORDER","message":"Duplicate order"}}`, "Duplicate order"},
	{"reference", `{"title":"Already Exists","status":409,"detail":"An order with this reference already exists"}`, "An order with this reference already exists"},
}

// createOrder is an order create of reference o-1 under key, asking the
// result endpoint by the key when result is set.
func (s *paidOrderServer) createOrder(key string, result bool) idem.Request {
	req := idem.Request{Key: key, URL: s.srv.URL + "/v1/orders", Body: []byte(`{"reference":"o-1","amount":100}`)}
	if result {
		req.ResultURL = s.srv.URL + "/v1/payments/by-key/" + key
	}
	return req
}

// requireOrderExistsUnknown asserts a create's "order exists" left
// unknown for a person: flagged ReviewRefusedAfterSend, no key conflict,
// the error giving the server's words and saying a copy of this request
// may have made the order.
func requireOrderExistsUnknown(t *testing.T, res *idem.Result, err error, words string) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict, "no key was reused")
	require.Contains(t, err.Error(), words)
	require.Contains(t, err.Error(), "the order exists already")
	require.Contains(t, err.Error(), "copy of this request")
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
}

// Order a (key a) is made with reference o-1; create k of the same
// reference, under its own key in the Idempotency-Key header, is refused
// 409 "Order already exists" (or "Duplicate order", or "An order with
// this reference already exists") on its first attempt. The order may be
// a copy of k a mesh sent first, its answer lost (the server checks the
// reference before the key). The 409 was read as k's key in flight and
// resent: five submits of k in the call, left pending, five more per
// Resume pass until the key window. Now, with no result endpoint, it is
// left unknown, ReviewRefusedAfterSend (ErrNeedsReview, not
// ErrKeyConflict): k sent once, and a restarted client's Resume sends
// nothing.
func TestOrderExistsToAFirstAttemptWithoutAResultEndpointIsLeftUnknown(t *testing.T) {
	for _, w := range orderExistsWords {
		t.Run(w.name, func(t *testing.T) {
			s := newPaidOrderServer(t, http.StatusConflict)
			s.words = w.body
			res, restart, err := s.refuseK(t, func(key string) idem.Request { return s.createOrder(key, false) })
			requireOrderExistsUnknown(t, res, err, w.words)
			require.Equal(t, 1, res.Attempts)
			restart()
		})
	}
}

// With a result endpoint, asked by the key the server keeps: a copy of k
// a mesh sent first made the order under k (modelled by storing it), and
// the endpoint names it: settled succeeded, pay_1, one submit and one
// query, where k was resent five times and left pending. Order a made it
// and the endpoint does not find k: unknown while the read path may lag,
// then, once the lag is over, a Resume of the restarted client fails k
// with the server's words and that the order exists already; k sent
// once, three queries, no submit from Resume.
func TestOrderExistsToAFirstAttemptAsksTheResultEndpoint(t *testing.T) {
	t.Run("a copy of ours made it", func(t *testing.T) {
		s := newPaidOrderServer(t, http.StatusConflict)
		s.words, s.orderFirst = orderExistsWords[0].body, true
		s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
		res, err := clientFor(t, s.srv, idemtest.NewClock(epoch)).Submit(t.Context(), s.createOrder("k", true))
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "pay_1", res.ResourceID)
		require.Empty(t, res.Review)
		s.requireSent(t, 1, map[string]int{"k": 1})
		s.requireQueries(t, 1)
	})
	t.Run("another key made it", func(t *testing.T) {
		s := newPaidOrderServer(t, http.StatusConflict)
		s.words = orderExistsWords[0].body
		clock := idemtest.NewClock(epoch)
		path := t.TempDir() + "/idem.journal"
		c, stop := s.open(t, path, clock)
		_, err := c.Submit(t.Context(), s.createOrder("a", false))
		require.NoError(t, err)

		res, err := c.Submit(t.Context(), s.createOrder("k", true))
		requireOrderExistsUnknown(t, res, err, "Order already exists")
		s.requireSent(t, 1, map[string]int{"a": 1, "k": 1})
		stop()
		s.requireResumeFailsK(t, path, clock, "Order already exists", "the order exists already")
	})
}

// invoiceAlreadyPaid are a pay's refusals of an invoice paid already.
// Modelled: no Stripe page in reach gives the words of its refusal to pay
// a paid invoice; a third-party page names its invoice_already_paid
// error, returned "when an attempt is made to process a payment for an
// invoice that has already been settled"
// (https://drdroid.io/integration-diagnosis-knowledge/stripe-billing-attempting-to-process-a-payment-for-an-invoice-that-has-already-been-paid).
// The words, the statuses and the envelope are modelled on it.
var invoiceAlreadyPaid = []string{
	`{"error":{"type":"invalid_request_error","message":"Invoice is already paid"}}`,
	`{"error":{"type":"invalid_request_error","message":"The invoice has already been paid."}}`,
}

// A pay of invoice in_1 under key k (Idempotency-Key header) refused on
// its first attempt "Invoice is already paid": the payment that paid it
// may be a copy of k a mesh sent first, its answer lost, as for "Order
// already paid" (paidRefusal), whose words did not take an invoice. The
// 409 was read as k's key in flight and resent, five submits, left
// pending; the 400 was failed at once, inviting the caller to pay again.
// Now both are left unknown, ReviewRefusedAfterSend, not ErrKeyConflict,
// one submit, and a restarted client's Resume sends nothing.
func TestInvoiceAlreadyPaidToAFirstAttemptIsLeftUnknown(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusBadRequest} {
		for i, body := range invoiceAlreadyPaid {
			t.Run(fmt.Sprint(status, " ", i), func(t *testing.T) {
				s := newPaidOrderServer(t, status)
				s.words = body
				res, restart, err := s.refuseK(t, func(key string) idem.Request {
					return idem.Request{Key: key, URL: s.srv.URL + "/v1/invoices/in_1/pay", Body: []byte(`{"amount":100}`)}
				})
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.NotErrorIs(t, err, idem.ErrFailed)
				require.NotErrorIs(t, err, idem.ErrKeyConflict, "no key was reused")
				require.Contains(t, err.Error(), "already")
				require.Contains(t, err.Error(), "the order is paid already")
				require.Equal(t, idem.StateUnknown, res.State)
				require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
				restart()
			})
		}
	}
}
