package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Cross-border payout APIs' documented idempotency answers, each to a
// client with the default settings but for where the API wants its key,
// and no Decoder: what idem does with them is safe. One request's worth
// of side effects, the same key and bytes on every send, no failure for
// what may have executed, no other request's result taken for ours.
func TestPayoutIdempotencyShapes(t *testing.T) {
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	const pawaPayPayout = `{"payoutId":"k","amount":"123.00","currency":"ZMW",` +
		`"recipient":{"type":"MMO","accountDetails":{"phoneNumber":"260763456789","provider":"MTN_MOMO_ZMB"}}}`
	for _, tt := range []struct {
		name   string
		shapes []shape
		header string // the key's header; "" with the key in the body
		body   string
		state  idem.State
		kinds  []error
		posts  int
	}{
		// https://docs.nium.com/apis/reference/idempotency: the key goes
		// in an "idempotency-key" header, and "any subsequent requests
		// with the same key will return the same result, including 500
		// errors": a stored 500, unmarked, may have executed, and its
		// resends get it again until the budget is spent.
		{name: "nium stored 500", header: "idempotency-key", body: `{"beneficiary":{"id":"b1"},"payout":{"amount":100,"source_currency":"USD"}}`,
			shapes: []shape{{status: 500, body: `{"status":"INTERNAL_SERVER_ERROR","message":"Internal server error"}`}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},

		// https://docs.pawapay.io/v2/api-reference/payouts/initiate-payout:
		// the payoutId in the body is the key; a resend of one pawaPay
		// accepted is "ignored with the DUPLICATE_IGNORED status", a body
		// naming no payout: the lost create may have executed, and only
		// its read-back can say how it ended.
		{name: "pawapay DUPLICATE_IGNORED after a lost response, key in the body", body: pawaPayPayout,
			shapes: []shape{lost, {status: 200, body: `{"payoutId":"k","status":"DUPLICATE_IGNORED","created":"2026-11-29T12:00:01Z"}`}},
			state:  idem.StateUnknown, kinds: []error{idem.ErrUnknownOutcome}, posts: 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, tt.shapes...)
			opts := []idem.Option{idem.WithKeyInBody()}
			if tt.header != "" {
				opts = []idem.Option{idem.WithKeyHeader(tt.header, idem.KeyBare)}
			}
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), opts...)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payouts", Body: []byte(tt.body)})
			requireOutcome(t, res, err, tt.state, tt.kinds, "", "")
			if tt.header != "" {
				v.requireKeys(t, tt.header, "k", tt.posts)
			} else {
				v.requireBodies(t, tt.body, tt.posts)
			}
		})
	}
}
