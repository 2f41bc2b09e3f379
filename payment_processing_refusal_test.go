package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestPaymentProcessingRefusalToAResendIsNoFailure: a 400 that says the
// payment is still processing, or that the refund is refused because
// the payment is "still not processed or already refunded", answered to
// a resend after a 502 that may have followed the work, may be about
// our own first attempt: never failed, left for a person once it
// persists. No change: refusedAfterMaybeSent reads every such 4xx so.
//   - Pine Labs' refund API, 400 REJECTED "Refund transaction not allowed
//     as original transaction still not processed or already refunded"
//     (https://developers.creditpluspinelabs.com/reference/refundtransaction).
//   - A bare "Payment processing", the last session's modelled words:
//     no page in the stored corpus quotes them for Razorpay, PayU or
//     Cashfree.
func TestPaymentProcessingRefusalToAResendIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
	}{
		{"pine labs", `{"code":"REJECTED","message":"Refund transaction not allowed as original transaction still not processed or already refunded"}`},
		{"modelled", `{"message":"Payment processing"}`},
		{"modelled, razorpay's envelope", `{"error":{"code":"BAD_REQUEST_ERROR","description":"Payment processing"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusBadGateway, body: `<html>502 Bad Gateway</html>`},
				shape{status: http.StatusBadRequest, body: tt.body})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: "rfnd-ord-3", URL: v.srv.URL + "/api/v1/refunds",
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   []byte(`{"transactionUtr":"TXN0012345","amount":100}`)})
			requireRefusedAfterSend(t, c, res, err, "rfnd-ord-3", "refund that may have been made")
			v.requireKeys(t, "Idempotency-Key", "rfnd-ord-3", 4)
		})
	}
}
