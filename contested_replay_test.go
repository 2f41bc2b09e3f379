package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A server that answers 409 while another request with the key is in
// flight and marks its stored answers replayed (Stripe's
// idempotency_key_in_use and Idempotent-Replayed: true,
// https://docs.stripe.com/idempotency) replays that request's answer once
// it is stored. When the stored answer is a 202 Accepted for work still
// running (RFC 9110 15.3.3), its resource is the other request's, as a
// replayed success would be: never recorded as ours, where a webhook
// for it, found by LookupResource, would settle our operation with the
// other request's payment.
func TestContestedKeyReplayedAcceptedIsNotOurs(t *testing.T) {
	inFlight := shape{status: http.StatusConflict, body: `{"error":{"code":"idempotency_key_in_use",` +
		`"type":"invalid_request_error","message":"There is currently another in-progress request using this Stripe API key and idempotency key."}}`}
	lost := shape{status: http.StatusBadGateway, body: `<html>bad gateway</html>`}
	theirs := shape{status: http.StatusAccepted, header: http.Header{"Idempotent-Replayed": {"true"}},
		body: `{"id":"pay_theirs","status":"pending"}`}

	v := newVendor(t, inFlight, lost, theirs)
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
	requireForeignKey(t, res, err)
	v.requireKeys(t, "Idempotency-Key", "k", 3)

	_, err = c.LookupResource(t.Context(), "", "pay_theirs")
	require.ErrorIs(t, err, idem.ErrNotFound, "the other request's payment names our operation")
}
