package idem_test

import (
	"fmt"
	"testing"

	"github.com/idemkit/idem"
)

// Checkout.com's POST /payments takes a partial authorization, "if you
// want the option to capture a portion of the authorization amount if the
// cardholder does not have sufficient funds to cover the full amount"
// (checkout.com/docs/payments/manage-payments/authorize-a-payment), asked
// for with {"partial_authorization": {"enabled": true}}, and answers the
// payment's "amount" beside "amount_requested" (checkout-sdk-go,
// payments/nas/payments.go: PaymentRequest's PartialAuthorization,
// PaymentResponse's AmountRequested); the key goes in Cko-Idempotency-Key
// (its client.go). That "amount" is the approved part, less than the
// amount sent when the card's funds fall short, is modelled on the
// documented partial authorization; so are the 409 while the key's
// request runs and the result endpoint by key.
const (
	checkoutPartialKey     = "ord-4471-auth-1"
	checkoutPaymentID      = "pay_mbabizu24mvu3mela5njyhpit4"
	checkoutOtherPayment   = "pay_w2qvtsoy3z4u5m7gcuq6mmdh3a"
	checkoutOtherRequested = `amount_requested "7000", not the request's amount "10000"`
)

// checkoutPartialAuth is our payment of 100.00, partial authorization
// enabled, its URL a path.
var checkoutPartialAuth = idem.Request{Key: checkoutPartialKey, URL: "/payments",
	Body: []byte(`{"source":{"type":"token","token":"tok_4gzeau5o2uqubbk6fufs3m7p54"},"amount":10000,"currency":"USD",` +
		`"reference":"ORD-4471","capture":false,"partial_authorization":{"enabled":true}}`)}

// checkoutPaymentAnswer is the payment id, approved approved of requested.
func checkoutPaymentAnswer(id string, approved, requested int) string {
	return fmt.Sprintf(`{"id":%q,"action_id":"act_y3oqhf46pyzuxjbcn2giaqnb44","amount":%d,"amount_requested":%d,"currency":"USD",`+
		`"approved":true,"status":"Authorized","auth_code":"770687","response_code":"10000","response_summary":"Approved",`+
		`"reference":"ORD-4471","processed_on":"2026-12-06T15:58:02Z","balances":{"total_authorized":%d,"available_to_capture":%d},`+
		`"_links":{"self":{"href":"https://api.checkout.com/payments/%s"}}}`, id, approved, requested, approved, approved, id)
}

// Our payment of 100.00 is partly authorised, 60.00, and its answer lost:
// the result query answers it, "amount" 6000 beside "amount_requested"
// 10000. idem compared the approved amount with the one sent and left
// our authorised payment for a person as another request's
// (ReviewKeyInUse, ErrKeyConflict: 1 post, 1 payment made, 1 query). The
// answer names the amount asked for: compared by that, ours, succeeded.
// Another request's payment, which asked for 70.00, is another's, named
// by the amount it asked for.
func TestCheckoutPartialAuthorizationFoundByTheResultQuery(t *testing.T) {
	t.Run("ours", func(t *testing.T) {
		s := &lostAnswerServer{header: "Cko-Idempotency-Key", result: checkoutPaymentAnswer(checkoutPaymentID, 6000, 10000)}
		s.requireFoundByTheQuery(t, decodeStatusID("Authorized"), checkoutPartialAuth, checkoutPaymentID, "")
	})
	t.Run("another request's", func(t *testing.T) {
		s := &lostAnswerServer{header: "Cko-Idempotency-Key", result: checkoutPaymentAnswer(checkoutOtherPayment, 6000, 7000)}
		s.requireFoundByTheQuery(t, decodeStatusID("Authorized"), checkoutPartialAuth, "", checkoutOtherRequested)
	})
}

// The key is held by a copy of our payment (a sidecar's resend of a
// reset): two 409s, then its stored answer, 60.00 approved of the 100.00
// asked for. Ours, succeeded (3 posts, 1 payment made); the stored answer
// of a payment that asked for 70.00 is another request's.
func TestCheckoutPartialAuthorizationAfterTheKeyWasHeld(t *testing.T) {
	const busy = `{"request_id":"0HMR1LQBS2V1K:00000004","error_type":"request_in_progress"}`
	t.Run("ours", func(t *testing.T) {
		f := &firstAnswerServer{header: "Cko-Idempotency-Key", busyBody: busy}
		f.requireHeldThenStored(t, decodeStatusID("Authorized"), checkoutPartialAuth, checkoutPaymentAnswer(checkoutPaymentID, 6000, 10000), checkoutPaymentID, "")
	})
	t.Run("another request's", func(t *testing.T) {
		f := &firstAnswerServer{header: "Cko-Idempotency-Key", busyBody: busy}
		f.requireHeldThenStored(t, decodeStatusID("Authorized"), checkoutPartialAuth, checkoutPaymentAnswer(checkoutOtherPayment, 6000, 7000), "", checkoutOtherRequested)
	})
}
