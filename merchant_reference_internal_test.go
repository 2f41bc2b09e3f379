package idem

import (
	"strings"
	"testing"
)

// TestOtherRequestMerchantReference: the merchant's own reference tells
// two requests of one amount and currency apart, where an answer echoes
// it at the request's path (or Adyen's merchantReference for its
// reference); a provider's own spelling of it (case, separators, a cut
// to a bank's length, letters beyond ASCII), a reference the request did
// not give, or one named for another party or at another path proves
// nothing. A reference is no member an amendment keeps (fixed is false).
func TestOtherRequestMerchantReference(t *testing.T) {
	const adyen = `{"merchantAccount":"M","reference":"p-1","amount":{"currency":"EUR","value":2500},"paymentMethod":{"type":"scheme"}}`
	const adyenPart = `{"merchantAccount":"M","reference":"p-1","amount":{"currency":"EUR","value":2500},"order":{"pspReference":"8815","orderData":"Ab02"}}`
	const checkout = `{"source":{"type":"id","id":"src_1"},"amount":1000,"currency":"EUR","reference":"ORD-4471"}`
	const worldline = `{"order":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},"references":{"merchantReference":"order-1001"}}}`
	const worldlineBare = `{"order":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"}}}`
	worldlineAnswer := func(reference string) string {
		return `{"payment":{"id":"3066019730_0","paymentOutput":{"amountOfMoney":{"amount":1000,"currencyCode":"EUR"},` +
			`"references":{"merchantReference":"` + reference + `"}},"status":"CAPTURED"}}`
	}
	for _, tt := range []struct {
		name, body, answer, want string
	}{
		{"adyen's merchantReference, ours", adyen, `{"pspReference":"9915","resultCode":"Authorised","merchantReference":"p-1","amount":{"currency":"EUR","value":2500}}`, ""},
		{"adyen's merchantReference, another", adyen, `{"pspReference":"9915","resultCode":"Authorised","merchantReference":"p-2","amount":{"currency":"EUR","value":2500}}`,
			`merchantReference "p-2", not the request's reference "p-1"`},
		{"adyen's part payment, its order's reference the order's", adyenPart, `{"pspReference":"9915","resultCode":"Authorised","merchantReference":"p-1",` +
			`"amount":{"currency":"EUR","value":2500},"order":{"amount":{"currency":"EUR","value":10000},"pspReference":"8815","reference":"o-1"}}`, ""},
		{"checkout's reference, ours", checkout, `{"id":"pay_1","amount":1000,"currency":"EUR","reference":"ORD-4471","status":"Authorized"}`, ""},
		{"checkout's reference, another", checkout, `{"id":"pay_1","amount":1000,"currency":"EUR","reference":"ORD-4472","status":"Authorized"}`,
			`reference "ORD-4472", not the request's reference "ORD-4471"`},
		{"our reference a beginning of theirs", checkout, `{"id":"pay_1","amount":1000,"currency":"EUR","reference":"ORD-44712"}`, `reference "ORD-44712"`},
		{"the amount named before the reference", checkout, `{"id":"pay_1","amount":2500,"currency":"EUR","reference":"ORD-4472"}`, `amount "2500", not the request's amount "1000"`},
		{"upper-cased, separators dropped", `{"amount":1000,"reference":"Invoice 1001/2"}`, `{"amount":1000,"reference":"INVOICE 10012"}`, ""},
		{"cut to a bank's length", `{"amount":1000,"reference":"Rent December 2026 flat 4B"}`, `{"amount":1000,"reference":"RENT DECEMBER 2026"}`, ""},
		{"letters beyond ASCII, transliterated", `{"amount":1000,"reference":"Zahlung für 1001"}`, `{"amount":1000,"reference":"ZAHLUNG FUR 1001"}`, ""},
		{"an empty answer's", checkout, `{"id":"pay_1","amount":1000,"reference":""}`, ""},
		{"a number's", `{"amount":1000,"reference":1001}`, `{"amount":1000,"reference":"1002"}`, ""},
		{"a number answered", checkout, `{"id":"pay_1","amount":1000,"reference":4472}`, ""},
		{"a plain reference below the top level", `{"transfer":{"amount":1000,"reference":"a-1"}}`, `{"transfer":{"amount":1000,"reference":"b-2"}}`, ""},
		{"a shopper's reference", `{"amount":1000,"shopperReference":"shopper-1"}`, `{"amount":1000,"shopperReference":"shopper-2"}`, ""},
		{"stripe's client_reference_id, another", `{"mode":"payment","client_reference_id":"cart-1001"}`, `{"id":"cs_1","client_reference_id":"cart-1002"}`,
			`client_reference_id "cart-1002", not the request's client_reference_id "cart-1001"`},
		{"worldline's merchantReference, ours", worldline, worldlineAnswer("order-1001"), ""},
		{"worldline's merchantReference, another", worldline, worldlineAnswer("order-1002"),
			`references.merchantReference "order-1002", not the request's order.references.merchantReference "order-1001"`},
		// "If omitted, our platform will generate a random string"
		// (Worldline Direct's migration guide, ORDERID).
		{"worldline's made up for a request without one", worldlineBare, worldlineAnswer("a8f2c41d9b"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, fixed := otherRequest([]byte(tt.body), []byte(tt.answer), nil)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("otherRequest() = %q; want %q", got, tt.want)
			}
			if fixed {
				t.Errorf("otherRequest() fixed = true; a reference or amount is no fixed member")
			}
		})
	}
}
