package idem

import (
	"strings"
	"testing"
	"time"
)

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
		// GOPAX's 10221 and 10069 for an order: "no such" opens a phrase
		// whose last word is its noun.
		{`{"errorMessage":"No such client order ID","errorCode":10221,"errorData":"ord-9"}`, false},
		{`{"errorMessage":"No such order ID","errorCode":10069,"errorData":"73152094"}`, false},
		{`{"error":"No such merchant with ID 5"}`, true},
		{`{"error":"No such API key"}`, true},
		{`{"error":"no such order for this account"}`, false},
		// The operation's own "not found" in other nouns than its URL's.
		{`{"message":"Transfer not found"}`, false},
		{`{"message":"Charge not found"}`, false},
		{`{"message":"Resource not found"}`, false},
		{`{"error":"Record not found"}`, false},
		{`{"name":"RESOURCE_NOT_FOUND","details":[{"issue":"INVALID_RESOURCE_ID","description":"Specified resource ID does not exist. Please check the resource ID and try again."}],"message":"The specified resource does not exist."}`, false},
		{`{"status_code":"404","status_message":"Transaction doesn't exist."}`, false},
		{`{"errors":[{"code":"NOT_FOUND","detail":"Could not find payment with id: x","category":"INVALID_REQUEST_ERROR"}]}`, false},
		// The query's own parts: a GraphQL schema's field or type
		// (Hasura), a database's column or table (PostgREST).
		{`{"errors":[{"extensions":{"path":"$.selectionSet.orders","code":"validation-failed"},"message":"field 'orders' not found in type: 'query_root'"}]}`, true},
		{`{"errors":[{"message":"no such type exists in the schema: 'orders_bool_exp'"}]}`, true},
		{`{"code":"42703","details":null,"hint":null,"message":"column orders.client_order_id does not exist"}`, true},
		{`{"code":"42P01","details":null,"hint":null,"message":"relation \"api.orders\" does not exist"}`, true},
		{`{"errors":[{"message":"Order not found","extensions":{"code":"NOT_FOUND"}}]}`, false},
		// A member named "type" or "field" is no part of the query:
		// People Data Labs' 404, RFC 9457's problem type.
		{`{"status":404,"error":{"type":"not_found","message":"No records were found matching your request"}}`, false},
		{`{"type":"https://example.com/probs/not-found","title":"Not Found","status":404,"detail":"Order ord-9 not found"}`, false},
		{`{"field":"client_order_id","message":"Order not found"}`, false},
		{`{"status_code":"583-01","status":"The request method name does not exist","errors":["The request method name does not exist"]}`, true},
		// SQLite's, a colon after the part (Datasette's 400).
		{`{"ok":false,"rows":[],"error":"no such column: client_order_id"}`, true},
		{`{"ok":false,"rows":[],"error":"no such table: orders"}`, true},
		{`{"type": "not_found", "detail":"No such order: ord-9"}`, false},
		// A part named before the "not found" is the subject; one after
		// it only says where the operation was looked for.
		{`{"message":"Field 'order_id' not found in the request"}`, true},
		{`{"message":"Payment method not found"}`, true},
		{`{"message":"Order type not found"}`, true},
		{`{"message":"Transaction not found for this method"}`, false},
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
		// Named means a whole word of the path, or its plural: "app" is
		// no word of "/v1/applepay", "token" none of "/v1/tokenization".
		{`{"message":"App not found"}`, "https://api.example.com/v1/applepay/sessions", true},
		{`{"message":"App not found"}`, "https://api.example.com/v1/apps/a1/payments", false},
		{`{"message":"Token not found"}`, "https://api.example.com/v1/tokenization/payments", true},
		{`{"message":"Account not found"}`, "https://api.example.com/v1/accounting/entries", true},
		{`{"message":"Customer not found"}`, "https://api.example.com/v1/customerPayments", false},
		{`{"message":"Customer not found"}`, "https://api.example.com/v1/customer_payments", false},
	} {
		if got := missingOther([]byte(tt.body), tt.target); got != tt.want {
			t.Errorf("missingOther(%s, %s) = %v; want %v", tt.body, tt.target, got, tt.want)
		}
	}
}

// TestMissingOtherHostileBody: a query's answer up to the response cap
// (DefaultMaxResponseBytes) made of "not exist" again and again had each
// "exist" walk back over every word before it for a subject, all of
// them joining words: 1 MiB took minutes. A subject is a few words
// from its "not found", never farther.
func TestMissingOtherHostileBody(t *testing.T) {
	body := []byte(strings.Repeat("not exist ", DefaultMaxResponseBytes/len("not exist ")))
	done := make(chan bool, 1)
	go func() { done <- missingOther(body, "https://api.example.com/v1/orders") }()
	select {
	case got := <-done:
		if got {
			t.Errorf("missingOther(not exist…) = true; want false: it names no subject")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("missingOther of a 1 MiB answer took over 20s: its scan is not linear")
	}
}

// TestMissingOtherSubjectIsNearItsVerb: the subject of a "not found" is
// the word before its negation and the few verbs that join them, not a
// word any number of joining words back.
func TestMissingOtherSubjectIsNearItsVerb(t *testing.T) {
	body := `{"message":"Merchant ` + strings.Repeat("is ", 100) + `not found"}`
	if missingOther([]byte(body), "https://api.example.com/v1/orders") {
		t.Errorf("missingOther(Merchant is is … not found) = true; want false")
	}
	if !missingOther([]byte(`{"message":"Merchant could not be found"}`), "https://api.example.com/v1/orders") {
		t.Errorf("missingOther(Merchant could not be found) = false; want true")
	}
}
