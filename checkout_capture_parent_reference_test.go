package idem_test

import (
	"testing"

	"github.com/idemkit/idem"
)

// Checkout.com's capture, POST /payments/{id}/captures, carries the
// capture's own reference: {"amount": 100, "reference": "ORD-752-814",
// "capture_type": "Final"} (its Capture a payment guide; NonFinal for one
// of several partial captures). Its answer lost, the result query
// answers the payment captured, as GET /payments/{id} gives it
// ("information about the payment or payout that matches the ID you
// provided", Get payment details), its "reference" the payment's. idem
// compared that with the capture's and left our own capture for a person
// as another request's (ReviewKeyInUse, ErrKeyConflict: 1 capture sent,
// 1 made, 1 query), on every capture so found. The payment's id is the
// one the request's path names: the resource acted on (actedOn), whose
// reference, as its amount, is its own. Ours, succeeded. Another
// payment's answer (its id not in our path) is still another request's.
// The result endpoint by key is modelled (WithResultEndpoint asks one
// answering what the key's request made or acted on), the answer's shape
// Checkout.com's.
func TestCheckoutCaptureFoundAsItsPaymentByTheResultQuery(t *testing.T) {
	const payment = "pay_f2ws3hn4ijquzbytp3v5lsfxge"
	capture := idem.Request{Key: "cap-7c1e2f90", URL: "/payments/" + payment + "/captures",
		Body: []byte(`{"amount":500,"reference":"CAP-ORD-5023-1","capture_type":"NonFinal"}`)}
	answer := func(id, amount, reference string) string {
		return `{"id":"` + id + `","requested_on":"2026-12-06T13:39:44Z","amount":` + amount + `,"currency":"EUR",` +
			`"approved":true,"status":"Captured","reference":"` + reference + `","balances":{"total_authorized":1000,"total_captured":500}}`
	}
	t.Run("ours", func(t *testing.T) {
		s := &lostAnswerServer{header: "Cko-Idempotency-Key", result: answer(payment, "1000", "ORD-5023-4E89")}
		s.requireFoundByTheQuery(t, decodeStatusID("Captured"), capture, payment, "")
	})
	t.Run("another payment's", func(t *testing.T) {
		s := &lostAnswerServer{header: "Cko-Idempotency-Key", result: answer("pay_vti5layihapu5bhbn5tjtk6eem", "500", "ORD-6001")}
		s.requireFoundByTheQuery(t, decodeStatusID("Captured"), capture, "", `reference "ORD-6001", not the request's reference "CAP-ORD-5023-1"`)
	})
}
