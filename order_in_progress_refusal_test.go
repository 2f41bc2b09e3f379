package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A PSP that ties one payment to one order id checks that id before, or
// without, its idempotency store: Razorpay does not allow "initiating
// another payment using the same order id" while one on it is authorised
// (https://razorpay.com/docs/payments/orders/faqs). Such a gateway
// refuses a payment on an order whose payment still runs with a 400 in
// words that name the order or payment, not the key ("Payment with this
// order id is in progress", or a code, PAYMENT_IN_PROGRESS). No page in
// the stored corpus quotes these words for a named provider: the shape
// is the one the last session's report gives. idem read it, to a first
// attempt with the key in a header, as a plain 400: ErrFailed, though
// the payment running may be a copy of this very request (a mesh's retry
// of the first attempt whose answer it lost, net/http's resend on a dead
// connection), and a caller told "failed" pays again under a new key.
var orderInProgress = shape{status: http.StatusBadRequest,
	body: `{"error":{"code":"PAYMENT_IN_PROGRESS","message":"Payment with this order id is in progress"}}`}

// TestOrderInProgressRefusalToAFirstAttempt: to a first attempt, the
// payment running is another request's or a copy of ours: left for a
// person (ReviewKeyInUse), never failed, sent once.
func TestOrderInProgressRefusalToAFirstAttempt(t *testing.T) {
	for name, running := range map[string]shape{
		"words":     orderInProgress,
		"code only": {status: http.StatusBadRequest, body: `{"error":"PAYMENT_IN_PROGRESS"}`},
		"a transaction being processed": {status: http.StatusBadRequest,
			body: `{"message":"Transaction for this order is being processed. Please check its status."}`},
		// The same words under a 422, the status many APIs give every
		// business-rule refusal (modelled).
		"a 422": {status: http.StatusUnprocessableEntity, body: `{"message":"Payment request is in progress"}`},
	} {
		t.Run(name, func(t *testing.T) {
			v := newVendor(t, running, shape{status: http.StatusCreated, body: `{"id":"pay_2","status":"succeeded"}`})
			res, err := v.submit(t)
			requireForeignKey(t, res, err)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}

// TestOrderInProgressRefusalAfterALostAnswer: after a first attempt whose
// answer a gateway lost, the payment running is ours: waited for, never
// counted among the refusals that leave it for a person, and settled by
// the stored answer once it ends. One payment, five sends of one key.
func TestOrderInProgressRefusalAfterALostAnswer(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>502 Bad Gateway</html>`}
	stored := shape{status: http.StatusOK, header: http.Header{"Idempotent-Replayed": {"true"}}, body: `{"id":"pay_1","status":"succeeded"}`}
	v := newVendor(t, lost, orderInProgress, orderInProgress, orderInProgress, stored)
	res, err := v.submit(t)
	requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_1", "")
	v.requireKeys(t, "Idempotency-Key", "k", 5)
}

// TestOtherThingsInProgressStayFailures: a 400 saying something other
// than the order or payment is in progress (the account's verification,
// a settlement) refuses the request on its merits: failed at once.
func TestOtherThingsInProgressStayFailures(t *testing.T) {
	for _, body := range []string{
		`{"error":{"code":"ACCOUNT_UNDER_REVIEW","message":"Account verification is in progress"}}`,
		`{"message":"Settlement in progress, try after 30 minutes"}`,
	} {
		t.Run(body, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadRequest, body: body})
			res, err := v.submit(t)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}
