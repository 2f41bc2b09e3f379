package idem

import "testing"

// TestMissingOther: which "not found" refusals are about something other
// than the operation a result query asked for.
func TestMissingOther(t *testing.T) {
	for _, tt := range []struct {
		body string
		want bool
	}{
		{`{"Message":"Merchant not found"}`, true},
		{`{"code":"8005","msg":"Merchant does not exist Merchant :Pvfu987fd7ssfidOsaFdu9dsSiF"}`, true},
		{`{"message":"API key not found"}`, true},
		{`{"error":"api_key was not found"}`, true},
		{`{"message":"Token not found"}`, true},
		{`{"message":"merchantId does not exist"}`, true},
		{`{"message":"Merchant ID could not be found"}`, true},
		{`{"message":"The order could not be found"}`, false},
		{`{"message":"The account doesn't exist"}`, true},
		{`{"error":{"message":"No such customer: 'cus_1'"}}`, true},
		{`{"code":-2013,"msg":"Order does not exist."}`, false},
		{`{"status":"error","message":"No transaction was found for this id","data":null}`, false},
		{`{"message":"Transaction not found for this merchant"}`, false},
		{`{"message":"Idempotency key not found"}`, false},
		{`{"error":{"message":"No such payment_intent: 'pi_1'"}}`, false},
		{`{"message":"Not found"}`, false},
		{`{"message":"Payment not found"}`, false},
		{`{"message":"MID does not exist"}`, true},
		{`{"message":"Customer not found"}`, true},
	} {
		if got := missingOther([]byte(tt.body), "https://api.example.com/v1/payments?merchant=m1"); got != tt.want {
			t.Errorf("missingOther(%s) = %v; want %v", tt.body, got, tt.want)
		}
	}
}

// TestMissingOtherOwnSubject: a subject the operation's URL names is the
// operation's own "not found".
func TestMissingOtherOwnSubject(t *testing.T) {
	for _, tt := range []struct {
		body, target string
		want         bool
	}{
		{`{"message":"Customer not found"}`, "https://api.example.com/v1/customers", false},
		{`{"message":"Customer not found"}`, "https://customers.example.com/v1/payments", true},
		{`{"message":"Token not found"}`, "https://api.example.com/v1/tokens", false},
		{`{"message":"Merchant ID not found"}`, "https://api.example.com/v1/merchants", false},
		{`{"message":"Merchant ID not found"}`, "https://api.example.com/v1/orders", true},
		{`{"message":"API key not found"}`, "https://api.example.com/v1/orders", true},
	} {
		if got := missingOther([]byte(tt.body), tt.target); got != tt.want {
			t.Errorf("missingOther(%s, %s) = %v; want %v", tt.body, tt.target, got, tt.want)
		}
	}
}
