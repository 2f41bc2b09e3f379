package idem_test

import (
	"fmt"
	"testing"

	"github.com/idemkit/idem"
)

// Airwallex captures an authorised PaymentIntent with POST
// /api/v1/pa/payment_intents/{id}/capture (airwallex.com/docs/api/payments/
// payment_intents), {"amount": …, "request_id": …}: "Partial capture means
// you capture less than the authorized amount" (airwallex.com/docs/payments/
// payment-operations/manage-payments). The answer is the PaymentIntent
// acted on, whose "amount" is "Payment amount in the specified currency"
// and "captured_amount" the "Amount captured so far" (its PaymentIntent
// schema as API Evangelist's third-party copy gives it,
// apis.io/schemas/airwallex/airwallex-payment-intent): after a
// partial capture of 50 of 100, "amount" is 100, not the 50 sent.
// Airwallex keys a request by its body's request_id; the key is modelled
// in a header here, and so is the result endpoint by key (as
// WithResultEndpoint asks: one answering the intent the key's request
// acted on), the comparison being the same.
const (
	airwallexIntent      = "int_hkdmr7v9rg1j58ky8re"
	airwallexOtherIntent = "int_sgdm4k2ph6w0xq3vn7a"
	airwallexCaptureKey  = "2f1e7c9a-5d4b-4e8f-9a61-7c3d2b1e0f55"
	airwallexCaptureBody = `{"amount":50,"request_id":"` + airwallexCaptureKey + `"}`
	airwallexOtherAmount = `amount "80", not the request's amount "50"`
)

// airwallexCapture is our partial capture of airwallexIntent, its URL a
// path.
var airwallexCapture = idem.Request{Key: airwallexCaptureKey,
	URL: "/api/v1/pa/payment_intents/" + airwallexIntent + "/capture", Body: []byte(airwallexCaptureBody)}

// airwallexIntentAnswer is a PaymentIntent id of amount, captured
// captured of it.
func airwallexIntentAnswer(id string, amount, captured int) string {
	return fmt.Sprintf(`{"id":%q,"request_id":"8b0c7d1e-aa61-4f0e-9d3a-3e2f6a5b4c11","amount":%d,"currency":"USD",`+
		`"merchant_order_id":"ord-7731","status":"SUCCEEDED","captured_amount":%d,"created_at":"2026-12-06T09:12:40+0000",`+
		`"updated_at":"2026-12-06T15:58:02+0000"}`, id, amount, captured)
}

// Our partial capture's answer is lost, and the result query answers the
// intent it captured: 100, of which 50 captured. idem compared the
// intent's "amount" with the 50 sent and left the capture it had made for
// a person as another request's (ReviewKeyInUse, ErrKeyConflict: 1
// capture sent, 1 made, 1 query); a caller told so captures again under a
// new key. The answer's id is the intent the request's path names: the
// resource acted on, whose top-level amounts are its own. Ours,
// succeeded. The capture of another intent (its id not in our path, its
// amount 80) is still another request's.
func TestAirwallexPartialCaptureFoundByTheResultQuery(t *testing.T) {
	t.Run("ours", func(t *testing.T) {
		s := &lostAnswerServer{header: "Idempotency-Key", result: airwallexIntentAnswer(airwallexIntent, 100, 50)}
		s.requireFoundByTheQuery(t, decodeStatusID("SUCCEEDED"), airwallexCapture, airwallexIntent, "")
	})
	t.Run("another intent's", func(t *testing.T) {
		s := &lostAnswerServer{header: "Idempotency-Key", result: airwallexIntentAnswer(airwallexOtherIntent, 80, 80)}
		s.requireFoundByTheQuery(t, decodeStatusID("SUCCEEDED"), airwallexCapture, "", airwallexOtherAmount)
	})
}

// The key is held by a copy of our partial capture (a sidecar's resend of
// a reset): two 409s, then its stored answer, the intent captured 50 of
// 100. Read as the capture's, it made our own capture another request's
// (ReviewKeyInUse, ErrKeyConflict: 3 posts, 1 capture made). Ours,
// succeeded; another intent's stored capture is still another request's.
// Airwallex itself refuses a reused request_id (duplicate_request); the
// 409s and the stored answer are modelled on a server that replays a
// key's first answer (firstAnswerServer), the answer's shape Airwallex's.
func TestAirwallexPartialCaptureAfterTheKeyWasHeld(t *testing.T) {
	const busy = `{"code":"request_in_progress","message":"A request with the same request_id is being processed"}`
	t.Run("ours", func(t *testing.T) {
		f := &firstAnswerServer{header: "Idempotency-Key", busyBody: busy}
		f.requireHeldThenStored(t, decodeStatusID("SUCCEEDED"), airwallexCapture, airwallexIntentAnswer(airwallexIntent, 100, 50), airwallexIntent, "")
	})
	t.Run("another intent's", func(t *testing.T) {
		f := &firstAnswerServer{header: "Idempotency-Key", busyBody: busy}
		f.requireHeldThenStored(t, decodeStatusID("SUCCEEDED"), airwallexCapture, airwallexIntentAnswer(airwallexOtherIntent, 80, 80), "", airwallexOtherAmount)
	})
}
