package idem_test

import (
	"net/http"
	"testing"
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
		// https://developer.mastercard.com/mastercard-send-person-to-person/documentation/response-error-codes/error-codes/:
		// Mastercard Send's service errors, its documented example; a
		// transfer the receiving bank declines is, by default, a 402
		// whose ReasonCode is DECLINE
		// (.../response-error-codes/http-response-reason-codes/; the
		// Description's words here are ours).
		{"mastercard send service error", shape{status: http.StatusBadRequest, body: `{"Errors":{"Error":[{"RequestId":"rqst_73HB-5RO5-0OGS-53SG",` +
			`"Source":"recipient_account_uri","ReasonCode":"INVALID_INPUT_VALUE","Description":"Invalid Account URI","Recoverable":"false",` +
			`"Details":{"Detail":[{"Name":"ErrorDetailCode","Value":"082000"}]}}]}}`}, "400: INVALID_INPUT_VALUE: Invalid Account URI"},
		{"mastercard send decline", shape{status: http.StatusPaymentRequired, body: `{"Errors":{"Error":[{"RequestId":"rqst_5RO5-73HB-0OGS-53SG",` +
			`"Source":"","ReasonCode":"DECLINE","Description":"The transaction was declined by the receiving issuer","Recoverable":"false"}]}}`},
			"402: DECLINE: The transaction was declined by the receiving issuer"},
		// https://developer.mastercard.com/cross-border-services/documentation/response-error-codes/cross-border-system/:
		// one error is an object, not a list of one.
		{"mastercard single error", shape{status: http.StatusBadRequest, body: `{"Errors":{"Error":{"RequestId":"13559438","Source":"proposal_id",` +
			`"ReasonCode":"INVALID_INPUT_VALUE","Description":"Invalid Input Value","Recoverable":"false",` +
			`"Details":{"Detail":{"Name":"ErrorDetailCode","Value":"082000"}}}}}`}, "400: INVALID_INPUT_VALUE: Invalid Input Value"},
		// https://plaid.com/docs/errors/ (the error object: error_type,
		// error_code, error_message, display_message, request_id): its
		// developer's words, not only the category (the words here are
		// ours).
		{"plaid transfer error", shape{status: http.StatusBadRequest, body: `{"display_message":null,"documentation_url":"https://plaid.com/docs/errors/transfer/",` +
			`"error_code":"TRANSFER_ACCOUNT_BLOCKED","error_message":"transfer was blocked due to a previous ACH return on this account",` +
			`"error_type":"TRANSFER_ERROR","request_id":"saKrIBuEB9qJZno","suggested_action":null}`},
			"400: transfer was blocked due to a previous ACH return on this account"},
		{"no reason in the body", shape{status: http.StatusForbidden, body: `{"errors":[]}`}, "403: Forbidden"},
	} {
		t.Run(tt.name, func(t *testing.T) { requireFailureReason(t, tt.shape, tt.reason) })
	}
}
