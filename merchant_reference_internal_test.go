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

// TestOtherRequestReferenceCut: an answer's reference whose letters and
// digits begin ours is ours cut by a scheme only when it is at least the
// ours up to a cut's length (18: Faster Payments', TrueLayer's
// "Typically, the character limit for payment references is 18
// characters"; 25, 35, 140), the spaces it ends in dropped. Any other
// beginning is another order's: sequential order numbers make ours begin
// with another's (ord-12 with ord-1, INV-2026-10 with INV-2026-1,
// ORDER-2026-12-07-123 with ORDER-2026-12-07-12, long as it is).
func TestOtherRequestReferenceCut(t *testing.T) {
	body := func(reference string) string {
		return `{"amount":1000,"currency":"GBP","reference":"` + reference + `"}`
	}
	answer := func(reference string) string {
		return `{"id":"pay_1","amount":1000,"currency":"GBP","reference":"` + reference + `","status":"Captured"}`
	}
	for _, tt := range []struct {
		name, ours, theirs, want string
	}{
		{"ord-1 for ord-12", "ord-12", "ord-1", `reference "ord-1", not the request's reference "ord-12"`},
		{"INV-2026-1 for INV-2026-10", "INV-2026-10", "INV-2026-1", `reference "INV-2026-1", not the request's reference "INV-2026-10"`},
		{"upper-cased, ord-1 for ord-12", "ord-12", "ORD1", `reference "ORD1"`},
		{"a beginning shorter than any cut", "Rent December 2026 flat 4B", "RENT DEC", `reference "RENT DEC"`},
		{"cut to Faster Payments' 18", "Rent December 2026 flat 4B", "RENT DECEMBER 2026", ""},
		{"cut to 18, the space it ended in dropped", "Payment for order 4471-B", "PAYMENT FOR ORDER", ""},
		{"cut to SEPA's 25", "Invoice 2026-000123 for flat 4B, December", "Invoice 2026-000123 for f", ""},
		{"cut to SWIFT's 35", "Invoice 2026-000123 for flat 4B, December rent", "Invoice 2026-000123 for flat 4B, De", ""},
		{"18 long, not ours cut", "Rent December 2026 flat 4B", "RENT NOVEMBER 2026", `reference "RENT NOVEMBER 2026"`},
		{"ours exactly", "ord-12", "ORD-12", ""},
		{"a long beginning at no cut's length", "ORDER-2026-12-07-123", "ORDER-2026-12-07-12", `reference "ORDER-2026-12-07-12"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := otherRequest([]byte(body(tt.ours)), []byte(answer(tt.theirs)), nil)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("otherRequest() = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestOtherRequestActedOnReference: an answer whose id the request's path
// names is the resource acted on (actedOn), and its merchant reference is
// that resource's, not the operation's: Checkout.com's capture, POST
// /payments/{id}/captures with its own {"amount": 100, "reference":
// "ORD-752-814", "capture_type": "Final"} (its Capture a payment guide),
// found as the payment GET /payments/{id} answers ("information about
// the payment or payout that matches the ID you provided", Get payment
// details), whose "reference" is the payment's. Compared, our own capture
// was another request's. Another payment's answer still is.
func TestOtherRequestActedOnReference(t *testing.T) {
	const capture = `{"amount":500,"reference":"CAP-ORD-5023-1","capture_type":"NonFinal"}`
	acted := pathSegments("https://api.checkout.com/payments/pay_1/captures", "k-1")
	for _, tt := range []struct {
		name, body, answer, want string
	}{
		{"the payment captured, its reference", capture, `{"id":"pay_1","amount":1000,"currency":"EUR","reference":"ORD-5023-4E89","status":"Captured"}`, ""},
		{"the payment captured, a nested merchantReference", `{"amount":500,"references":{"merchantReference":"cap-1"}}`,
			`{"id":"pay_1","amount":1000,"references":{"merchantReference":"order-1"}}`, ""},
		{"another payment", capture, `{"id":"pay_2","amount":500,"currency":"EUR","reference":"ORD-6001","status":"Captured"}`,
			`reference "ORD-6001", not the request's reference "CAP-ORD-5023-1"`},
		{"the capture, another reference", capture, `{"action_id":"act_1","amount":500,"reference":"CAP-ORD-5023-2"}`,
			`reference "CAP-ORD-5023-2", not the request's reference "CAP-ORD-5023-1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := otherRequest([]byte(tt.body), []byte(tt.answer), acted)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("otherRequest() = %q; want %q", got, tt.want)
			}
		})
	}
}
