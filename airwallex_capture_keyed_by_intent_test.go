package idem_test

import (
	"testing"

	"github.com/idemkit/idem"
)

// A caller that captures each intent once may key the capture by the
// intent it captures: request_id, "Unique request ID specified by the
// merchant" (Airwallex's capture, airwallex.com/docs/api/payments/
// payment_intents), the intent's own id. The key then names the intent in
// the path, POST /api/v1/pa/payment_intents/{id}/capture, not a resource
// the request made there: the intent answered is still the one acted on,
// its "amount" (100) the intent's, not the 50 captured. idem dropped the
// key's segment from the path wherever it stood, took the intent for the
// capture, and left our own partial capture for a person as another
// request's (ReviewKeyInUse, ErrKeyConflict: 1 capture sent, 1 made, 1
// query). The key as a parent in the path is modelled on Airwallex's
// request_id, taken from a business id as the design allows; the query
// and the header as airwallex_partial_capture_parent_intent_test.go's.
func TestAirwallexPartialCaptureKeyedByItsIntent(t *testing.T) {
	req := idem.Request{Key: airwallexIntent, URL: airwallexCapture.URL,
		Body: []byte(`{"amount":50,"request_id":"` + airwallexIntent + `"}`)}
	t.Run("ours", func(t *testing.T) {
		s := &lostAnswerServer{header: "Idempotency-Key", result: airwallexIntentAnswer(airwallexIntent, 100, 50)}
		s.requireFoundByTheQuery(t, decodeStatusID("SUCCEEDED"), req, airwallexIntent, "")
	})
	t.Run("another intent's", func(t *testing.T) {
		s := &lostAnswerServer{header: "Idempotency-Key", result: airwallexIntentAnswer(airwallexOtherIntent, 80, 80)}
		s.requireFoundByTheQuery(t, decodeStatusID("SUCCEEDED"), req, "", airwallexOtherAmount)
	})
}
