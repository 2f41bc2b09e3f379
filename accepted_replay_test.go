package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Checkout.com answers a payment resent with its key after the first was
// processed with 202 and the first answer's body
// (https://support.checkout.com/hc/en-us/articles/26763450855186): a 202
// whose payment says it is done. Read as "accepted, not completed", a
// payment whose first answer was lost stayed processing on every resend
// and never settled. A 202 whose resource is still pending stays
// processing.
func TestAcceptedReplayOfCompletedPayment(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	cko := []idem.Option{idem.WithKeyHeader("Cko-Idempotency-Key", idem.KeyBare)}
	for _, tt := range []struct {
		name  string
		body  string
		state idem.State
		posts int
	}{
		{"authorized", `{"id":"pay_mbabizu24mvu3mela5njyhpit4","action_id":"act_1","amount":6540,"currency":"USD",` +
			`"approved":true,"status":"Authorized","response_code":"10000","response_summary":"Approved"}`, idem.StateSucceeded, 2},
		{"captured", `{"id":"pay_mbabizu24mvu3mela5njyhpit4","status":"Captured","approved":true}`, idem.StateSucceeded, 2},
		{"card verified", `{"id":"pay_mbabizu24mvu3mela5njyhpit4","status":"Card Verified","approved":true}`, idem.StateSucceeded, 2},
		{"pending stays processing", `{"id":"pay_mbabizu24mvu3mela5njyhpit4","status":"Pending",` +
			`"_links":{"redirect":{"href":"https://3ds.example/"}}}`, idem.StateProcessing, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, lost, shape{status: http.StatusAccepted, body: tt.body})
			res, err := v.submit(t, cko...)
			require.Equal(t, tt.state, res.State)
			if tt.state == idem.StateSucceeded {
				require.NoError(t, err)
				require.Equal(t, "pay_mbabizu24mvu3mela5njyhpit4", res.ResourceID)
			} else {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			}
			v.requireKeys(t, "Cko-Idempotency-Key", "k", tt.posts)
		})
	}
}
