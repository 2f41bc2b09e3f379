package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Checkout.com answers a declined card payment 201 with the payment,
// "approved": false and "status": "Declined"
// (checkout.com/docs/payments/manage-payments/idempotency keeps such a
// processed answer for the Cko-Idempotency-Key), and a resend under the
// key with 202 and that body (support.checkout.com/hc/en-us/articles/26763450855186).
// The 202 is the decline's replay, final: read as "accepted, not
// completed" it would stay processing and be resent until the budget
// ran out. It settles failed with the payment as its resource, after
// one resend; a decline answered at once is never resent.
func TestCheckoutDeclinedReplayIsFinal(t *testing.T) {
	const declined = `{"id":"pay_mbabizu24mvu3mela5njyhpit4","action_id":"act_1","amount":6540,"currency":"USD",` +
		`"approved":false,"status":"Declined","response_code":"20005","response_summary":"Decline - Do not honour"}`
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	for _, tt := range []struct {
		name   string
		shapes []shape
		posts  int
	}{
		{"declined at once", []shape{{status: http.StatusCreated, body: declined}}, 1},
		{"declined, replayed 202 after a lost answer", []shape{lost, {status: http.StatusAccepted, body: declined}}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t, idem.WithKeyHeader("Cko-Idempotency-Key", idem.KeyBare))
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			require.Equal(t, "pay_mbabizu24mvu3mela5njyhpit4", res.ResourceID)
			require.Empty(t, res.Review)
			v.requireKeys(t, "Cko-Idempotency-Key", "k", tt.posts)
		})
	}
}
