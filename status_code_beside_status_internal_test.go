package idem

import "testing"

// A result query's 2xx is an envelope's error when its "status_code" is
// an HTTP error's number (Midtrans's {"status_code":"406",…}), unless a
// created resource's status word stands beside it, which it numbers
// (dLocal's CANCELLED payment, "400":
// docs.dlocal.com/reference/payment-status-codes). Beside a refusal's
// word or an envelope's own it is still the call's error.
func TestEnvelopeErrorStatusCodeBesideStatus(t *testing.T) {
	for _, tt := range []struct {
		body string
		want bool
	}{
		{`{"status_code":"406","status_message":"Duplicate order ID.","id":"be929ec4"}`, true},
		{`{"id":"D-4-be8a9bb2","status":"CANCELLED","status_code":"400","status_detail":"The payment was cancelled."}`, false},
		{`{"id":"D-4-be8a9bb2","status":"PAID","status_code":"200"}`, false},
		{`{"id":"D-4-be8a9bb2","status":"FAILED","status_code":"500"}`, true},
		{`{"status":"ok","status_code":404}`, true},
		{`{"status":"404","status_code":"404"}`, true},
		// The code's own reason phrase names its error, not a resource's
		// state: snapd's envelope (snapcraft.io/docs/reference/development/error-responses;
		// {"result":{…},"status":"Not Found","status_code":404,"type":"error"}),
		// or the phrase as an enum's name (Spring's HttpStatus).
		{`{"type":"error","status":"Unauthorized","status_code":401,"result":{"message":"access denied"}}`, true},
		{`{"type":"error","status":"Internal Server Error","status_code":500,"result":{"message":"boom"}}`, true},
		{`{"status":"NOT_ACCEPTABLE","status_code":"406","id":"be929ec4"}`, true},
		{`{"status":"not-found","status_code":"404"}`, true},
		{`{"id":"D-4-be8a9bb2","status":"CANCELLED","status_code":"401"}`, false},
	} {
		if got := envelopeError([]byte(tt.body)); got != tt.want {
			t.Errorf("envelopeError(%s) = %v; want %v", tt.body, got, tt.want)
		}
	}
}
