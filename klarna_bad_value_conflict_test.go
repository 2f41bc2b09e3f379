package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// klarnaCompletedOtherBody is Klarna Payments' 409 to a create order
// (POST /payments/v1/authorizations/{authorizationToken}/order) whose
// authorization already placed an order with another body, in its error
// envelope (error_code, error_messages, correlation_id):
// https://docs.klarna.com/resources/developer-tools/error-handling/error-codes-and-messages-for-klarna-payments/
// ("409 - BAD_VALUE": "Not matching fields..." and "The order has been
// already completed with different request body").
const klarnaCompletedOtherBody = `{"error_code":"BAD_VALUE","error_messages":["The order has been already completed with different request body"],` +
	`"correlation_id":"6a9b1cb1-73a3-4936-a030-481ba4bb203b"}`

// Klarna's 409 BAD_VALUE refuses the order's values, or the order
// itself as already placed with another body: no request of the key is
// in flight, and these bytes are refused so forever. Read as the key in
// flight, it was resent to the end of the budget, and by every Do, Resume
// and Run after it until the key window closed, never failed nor left
// for a person. To a first attempt it is failed (a copy of these very
// bytes would have been answered the order, not "different request
// body"), after an attempt that may have executed it is asked about and
// left for a person, as any refusal then; the server's words are the
// reason either way.
func TestKlarnaBadValueConflict(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	refusal := shape{status: http.StatusConflict, body: klarnaCompletedOtherBody}
	for _, tt := range []struct {
		name   string
		shapes []shape
		state  idem.State
		kinds  []error
		review string
		posts  int
	}{
		{"to a first attempt", []shape{refusal}, idem.StateFailed, []error{idem.ErrFailed}, "", 1},
		{"after a lost response", []shape{lost, refusal}, idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrNeedsReview},
			idem.ReviewRefusedAfterSend, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Klarna-Idempotency-Key", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/payments/v1/authorizations/0b1d9815-165e-42e2-8867-35bc03789e00/order",
				Body: []byte(`{"purchase_country":"SE","purchase_currency":"SEK","locale":"sv-SE","order_amount":10000,"order_tax_amount":0}`)})
			requireOutcome(t, res, err, tt.state, tt.kinds, "", tt.review)
			v.requireKeys(t, "Klarna-Idempotency-Key", "k", tt.posts)
			if tt.state == idem.StateFailed {
				require.Equal(t, "409: BAD_VALUE: The order has been already completed with different request body", res.Reason)
				return
			}
			requireRefusedAfterSend(t, c, res, err, "k", "order")
		})
	}
}
