package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Mollie returns "a cached version of the initial response" to a request
// sent again with its Idempotency-Key within 24 hours, marked
// Idempotent-Replayed: true, and answers 409 Conflict to one that comes in
// while the first is still processed
// (mollie/api-documentation, source/overview/api-idempotency.rst;
// docs.mollie.com/overview/api-idempotency). A recurring payment
// (sequenceType recurring) is charged at once on its mandate, created
// "pending" (docs.mollie.com, Create payment). After a lost answer, the
// resend's replay settles it with one payment; a 409 is waited on, never
// a failure; a replay to a first attempt is another request's answer.
func TestMollieRecurringPaymentIdempotency(t *testing.T) {
	const payment = `{"resource":"payment","id":"tr_7UhSN1zuXS","mode":"live","amount":{"currency":"EUR","value":"10.00"},` +
		`"description":"Order 12345","sequenceType":"recurring","customerId":"cst_8wmqcHMN4U","status":"pending"}`
	replayed := http.Header{"Idempotent-Replayed": {"true"}}
	lost := shape{status: http.StatusGatewayTimeout, body: `<html>gateway timeout</html>`}
	// Mollie's error object carries the HTTP status as a number; the
	// 409's words are not documented.
	running := shape{status: http.StatusConflict, body: `{"status":409,"title":"Conflict"}`}
	for _, tt := range []struct {
		name   string
		shapes []shape
		state  idem.State
		review string
		posts  int
	}{
		{"replayed after a lost answer", []shape{lost, {status: http.StatusCreated, header: replayed, body: payment}},
			idem.StateSucceeded, "", 2},
		{"in progress, then replayed", []shape{lost, running, {status: http.StatusCreated, header: replayed, body: payment}},
			idem.StateSucceeded, "", 3},
		{"replayed to a first attempt", []shape{{status: http.StatusCreated, header: replayed, body: payment}},
			idem.StateUnknown, idem.ReviewKeyInUse, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			res, err := v.submit(t)
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, tt.state, res.State, "err: %v", err)
			require.Equal(t, tt.review, res.Review)
			if tt.state == idem.StateSucceeded {
				require.NoError(t, err)
				require.Equal(t, "tr_7UhSN1zuXS", res.ResourceID)
			} else {
				requireForeignKey(t, res, err)
			}
			v.requireKeys(t, "Idempotency-Key", "k", tt.posts)
		})
	}
}
