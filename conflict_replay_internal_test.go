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
		{"reference", `{"reference":"payout-2026-0042","amount":"25.00"}`,
			`{"id":"pmt_1","reference":"payout-2026-0042","status":"PAID"}`, true},
		{"merchantRefNum in an envelope", `{"merchantRefNum":"08afbafc-f169-4ed8-a404-345greuif783"}`,
			`{"data":{"id":"pmt_1","merchantRefNum":"08afbafc-f169-4ed8-a404-345greuif783"}}`, true},
		{"another reference", `{"reference":"payout-2026-0042"}`,
			`{"id":"pmt_1","reference":"payout-2026-0007"}`, false},
		{"under another member", `{"reference":"payout-2026-0042"}`,
			`{"id":"pmt_1","description":"payout-2026-0042"}`, false},
		{"recipient's id", `{"recipient_id":"rcp_8c1f22","amount":"25.00"}`,
			`{"id":"pmt_1","recipient_id":"rcp_8c1f22","status":"PAID"}`, false},
		{"shopper's reference", `{"shopperReference":"shopper-00042-acme","amount":"49.00"}`,
			`{"id":"pmt_1","shopperReference":"shopper-00042-acme","status":"PAID"}`, false},
		{"original payment's reference", `{"originalRequestPaymentReference":"0x8f3a91c2d4e5b607"}`,
			`{"id":"pmt_1","originalRequestPaymentReference":"0x8f3a91c2d4e5b607"}`, false},
		{"client_reference_id", `{"client_reference_id":"payout-2026-0042"}`,
			`{"id":"pmt_1","client_reference_id":"payout-2026-0042"}`, true},
		{"short reference", `{"reference":"42"}`, `{"id":"pmt_1","reference":"42"}`, false},
		{"form body", `reference=payout-2026-0042`, `{"id":"pmt_1","reference":"payout-2026-0042"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := echoesReference([]byte(tc.body), []byte(tc.answer)); got != tc.want {
				t.Errorf("echoesReference(%s, %s) = %v; want %v", tc.body, tc.answer, got, tc.want)
			}
		})
	}
}
