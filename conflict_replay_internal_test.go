package idem

import "testing"

// TestEchoesReference: only the request's own reference, distinctive and
// at the same member, shows that a 409's resource is about this request;
// a recipient's id or a short value is shared by other requests.
func TestEchoesReference(t *testing.T) {
	for _, tc := range []struct {
		name, body, answer string
		want               bool
	}{
		{"merchantRefNum", `{"merchantRefNum":"payout-2026-0042","amount":"25.00"}`,
			`{"id":"pmt_1","merchantRefNum":"payout-2026-0042","status":"PAID"}`, true},
		{"a plain reference, a bank statement's text", `{"reference":"INV-2026-0042","amount":"25.00"}`,
			`{"id":"pmt_1","reference":"INV-2026-0042","status":"PAID"}`, false},
		{"merchantRefNum in an envelope", `{"merchantRefNum":"08afbafc-f169-4ed8-a404-345greuif783"}`,
			`{"data":{"id":"pmt_1","merchantRefNum":"08afbafc-f169-4ed8-a404-345greuif783"}}`, true},
		{"another reference", `{"merchantRefNum":"payout-2026-0042"}`,
			`{"id":"pmt_1","merchantRefNum":"payout-2026-0007"}`, false},
		{"under another member", `{"merchantRefNum":"payout-2026-0042"}`,
			`{"id":"pmt_1","description":"payout-2026-0042"}`, false},
		{"recipient's id", `{"recipient_id":"rcp_8c1f22","amount":"25.00"}`,
			`{"id":"pmt_1","recipient_id":"rcp_8c1f22","status":"PAID"}`, false},
		{"shopper's reference", `{"shopperReference":"shopper-00042-acme","amount":"49.00"}`,
			`{"id":"pmt_1","shopperReference":"shopper-00042-acme","status":"PAID"}`, false},
		{"original payment's reference", `{"originalRequestPaymentReference":"0x8f3a91c2d4e5b607"}`,
			`{"id":"pmt_1","originalRequestPaymentReference":"0x8f3a91c2d4e5b607"}`, false},
		{"client_reference_id", `{"client_reference_id":"payout-2026-0042"}`,
			`{"id":"pmt_1","client_reference_id":"payout-2026-0042"}`, true},
		{"short reference", `{"merchantRefNum":"42"}`, `{"id":"pmt_1","merchantRefNum":"42"}`, false},
		{"form body", `merchantRefNum=payout-2026-0042`, `{"id":"pmt_1","merchantRefNum":"payout-2026-0042"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := echoesReference([]byte(tc.body), []byte(tc.answer)); got != tc.want {
				t.Errorf("echoesReference(%s, %s) = %v; want %v", tc.body, tc.answer, got, tc.want)
			}
		})
	}
}

// TestHoldsKey: a 409's body shows it is the key's only by the key's value
// at a member named as a key; at another member (the order a payment is
// of, a description) it shows what the resource is about.
func TestHoldsKey(t *testing.T) {
	testHoldsKey(t, "ORD-2026-0042-A", []holdsKeyCase{
		{"idempotency_key", `{"id":"pmt_1","idempotency_key":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"DOKU's headers.request_id", `{"response":{"order":{"invoice_number":"INV-1"}},"headers":{"request_id":"ORD-2026-0042-A"}}`, "Request-Id", true},
		{"merchant reference", `{"id":"pmt_1","merchantReference":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"the body member the key goes in", `{"orderId":"1","clientOrderId":"ORD-2026-0042-A"}`, "clientOrderId", true},
		{"X-Request-Id echoed in the body", `{"id":"pmt_1","x_request_id":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"the key's own name", `{"id":"pmt_1","key":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"order_id", `{"id":"pmt_1","order_id":"ORD-2026-0042-A"}`, "Idempotency-Key", false},
		{"a refund's original request", `{"id":"rfd_1","original_request_id":"ORD-2026-0042-A"}`, "Idempotency-Key", false},
		{"an order's own key", `{"id":"ord_1","order_key":"ORD-2026-0042-A"}`, "Idempotency-Key", false},
		{"description", `{"id":"pmt_1","description":"ORD-2026-0042-A"}`, "Idempotency-Key", false},
		{"in a list of invoices", `{"id":"pmt_1","invoices":["ORD-2026-0042-A"]}`, "Idempotency-Key", false},
		{"another key", `{"id":"pmt_1","idempotency_key":"ORD-2026-0043-A"}`, "Idempotency-Key", false},
		{"too deep", `{"a":{"b":{"c":{"d":{"e":{"idempotency_key":"ORD-2026-0042-A"}}}}}}`, "Idempotency-Key", false},
		{"not JSON", `idempotency_key=ORD-2026-0042-A`, "Idempotency-Key", false},
		{"idempotencyKey", `{"id":"pmt_1","idempotencyKey":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"IdempotencyKey", `{"Id":"pmt_1","IdempotencyKey":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"idempotency-key", `{"id":"pmt_1","idempotency-key":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"requestId", `{"id":"pmt_1","requestId":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"a member name escaped", `{"id":"pmt_1","idempotency\u005fkey":"ORD-2026-0042-A"}`, "Idempotency-Key", true},
		{"in an array element", `{"id":"b_1","items":[{"request_id":"ORD-2026-0042-A"}]}`, "Idempotency-Key", true},
		{"too deep in arrays", `[[[[[{"request_id":"ORD-2026-0042-A"}]]]]]`, "Idempotency-Key", false},
	})
}

// TestHoldsKeyShortKey: a short key at a member named as the merchant's
// reference is another order's number as well as ours, unless the
// request carries the key in that member.
func TestHoldsKeyShortKey(t *testing.T) {
	testHoldsKey(t, "1001", []holdsKeyCase{
		{"merchantRefNum", `{"id":"pmt_1","merchantRefNum":"1001"}`, "Idempotency-Key", false},
		{"the body member the key goes in", `{"id":"pmt_1","merchantRefNum":"1001"}`, "merchantRefNum", true},
		{"idempotency_key", `{"id":"pmt_1","idempotency_key":"1001"}`, "Idempotency-Key", true},
	})
}

// holdsKeyCase is one answer and the name the request carries the key
// under, and whether holdsKey finds the key in it.
type holdsKeyCase struct {
	name, answer, keyName string
	want                  bool
}

func testHoldsKey(t *testing.T, key string, cases []holdsKeyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdsKey([]byte(tc.answer), key, tc.keyName); got != tc.want {
				t.Errorf("holdsKey(%s, %q, %q) = %v; want %v", tc.answer, key, tc.keyName, got, tc.want)
			}
		})
	}
}
