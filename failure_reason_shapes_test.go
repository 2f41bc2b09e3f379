package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A refusal is settled failed "with the server's reason": in the shapes
// APIs document for a decline, not the status's text, which tells a
// person reading the failure nothing of why.
func TestFailureReasonShapes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		shape  shape
		reason string
	}{
		// https://developer.squareup.com/reference/square/objects/Error
		{"square errors list", shape{status: http.StatusPaymentRequired, body: `{"errors":[{"code":"GENERIC_DECLINE",` +
			`"detail":"Authorization error: 'GENERIC_DECLINE'","category":"PAYMENT_METHOD_ERROR"}],` +
			`"payment":{"id":"R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY","status":"FAILED"}}`}, "402: Authorization error: 'GENERIC_DECLINE'"},
		{"errors list with a message", shape{status: http.StatusBadRequest, body: `{"errors":[{"message":"Credit card number is invalid."}]}`},
			"400: Credit card number is invalid."},
		// RFC 9457 problem details.
		{"problem details", shape{status: http.StatusForbidden, header: http.Header{"Content-Type": {"application/problem+json"}},
			body: `{"type":"https://example.com/probs/out-of-credit","title":"You do not have enough credit.",` +
				`"detail":"Your current balance is 30, but that costs 50.","status":403}`}, "403: Your current balance is 30, but that costs 50."},
		{"problem title only", shape{status: http.StatusForbidden, body: `{"type":"about:blank","title":"Card expired","status":403}`},
			"403: Card expired"},
		// https://www.checkout.com/docs/developer-resources/codes/error-codes
		{"checkout.com error codes", shape{status: http.StatusUnprocessableEntity, body: `{"request_id":"0HL80RJLS76I7",` +
			`"error_type":"request_invalid","error_codes":["card_expired"]}`}, "422: request_invalid: card_expired"},
		{"an error's message still first", shape{status: http.StatusPaymentRequired, body: `{"error":{"message":"Your card was declined."},` +
			`"detail":"other"}`}, "402: Your card was declined."},
		// A UTF-8 byte order mark first (json_bom_test.go).
		{"after a byte order mark", shape{status: http.StatusPaymentRequired, body: "\ufeff" + `{"error":{"message":"Your card was declined."}}`},
			"402: Your card was declined."},
		{"no reason in the body", shape{status: http.StatusForbidden, body: `{"errors":[]}`}, "403: Forbidden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shape)
			res, err := v.submit(t)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			require.Equal(t, tt.reason, res.Reason)
			require.ErrorContains(t, err, tt.reason)
			v.requireKeys(t, "Idempotency-Key", "k", 1)
		})
	}
}
