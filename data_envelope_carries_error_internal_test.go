package idem

import "testing"

// carriesError looks into a lone "data" envelope (dataResource) for an
// error as DecodeJSON reads one, and must not take a payment's own
// failure reason there for one: a declined payment is a resource, settled
// failed by its status, and read as an error a submit's decline was
// weighed as a refusal and a query's answer as no answer.
func TestDataEnvelopeCarriesError(t *testing.T) {
	for _, tt := range []struct {
		body string
		want bool
	}{
		// Circle's failed payment: its reason in "errorCode", "Only
		// present for payments in failed state"
		// (developers.circle.com/docs/api-errors, Entity Errors).
		{`{"data":{"id":"b8627ae8-732b-4d25-b947-1df8f4007a29","type":"payment","status":"failed","errorCode":"payment_failed",` +
			`"amount":{"amount":"3.14","currency":"USD"},"createDate":"2020-04-10T02:13:30.000Z"}}`, false},
		{`{"data":{"id":"b8627ae8-732b-4d25-b947-1df8f4007a29","type":"payment","status":"paid","amount":{"amount":"3.14","currency":"USD"}}}`, false},
		// Paddle's transaction (modelled): a declined attempt's reason is
		// in its "payments" list, "transaction.payments[].error_code"
		// (developer.paddle.com/changelog/2024/declined-not-retryable-error-code),
		// the envelope beside a "meta".
		{`{"data":{"id":"txn_01","status":"past_due","payments":[{"status":"error","error_code":"declined"}]},"meta":{"request_id":"r-1"}}`, false},
		// Circle's 400 and Paddle's 404: errors at the top, as before.
		{`{"code":2,"message":"Invalid entity.","errors":[{"error":"invalid_value","location":"metadata.email"}]}`, true},
		{`{"error":{"type":"request_error","code":"not_found","detail":"Entity txn_01 not found"},"meta":{"request_id":"r-1"}}`, true},
		// An error inside the envelope.
		{`{"data":{"error":{"code":"rate_limited","message":"Too many requests"}}}`, true},
		{`{"data":{"success":false,"message":"Service busy"},"meta":{"request_id":"r-1"}}`, true},
		// Not a lone envelope: its "data" is not the answer.
		{`{"data":{"error":{"code":"x"}},"links":{}}`, false},
	} {
		if got := carriesError([]byte(tt.body)); got != tt.want {
			t.Errorf("carriesError(%s) = %v, want %v", tt.body, got, tt.want)
		}
	}
}
