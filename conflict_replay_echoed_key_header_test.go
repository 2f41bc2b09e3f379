package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// DOKU echoes the key header on every answer ("Request-Id: Same as the
// request",
// dashboard.doku.com/docs/docs/jokul-checkout/section/jokul-checkout-response-header-sample),
// as servers that echo a request's id do: the echo says the answer is to
// this request, not that the resource in a 409 is the one the key
// created. The order's earlier payment in such a 409 (the record a create
// collides with, naming the key, taken from the order number, only as its
// order_id) was taken for the key's stored answer by the echo alone:
// DECLINED, it settled ours failed after a first attempt that may have
// executed, and the caller, told so, pays again under a new key; PAID, it
// settled ours with another payment's id. Either stays the key's request
// in flight, resent under the same Request-Id.
func TestConflictWithTheKeyHeaderEchoedOnEveryAnswerDoesNotSettle(t *testing.T) {
	const key = "ORD-2026-0042-A"
	echo := http.Header{"Request-Id": {key}, "Client-Id": {"MCH-0001-10791114622547"}}
	for _, status := range []string{"DECLINED", "PAID"} {
		t.Run(status, func(t *testing.T) {
			v := newVendor(t, shape{status: http.StatusGatewayTimeout, header: echo, body: gatewayTimeout.body},
				shape{status: http.StatusConflict, header: echo,
					body: `{"id":"pmt_2026_77aa01","order_id":"` + key + `","amount":"25.00","currency":"IDR","status":"` + status + `"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch), idem.WithKeyHeader("Request-Id", idem.KeyBare))
			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: v.srv.URL + "/v2/payments",
				Body: []byte(`{"order_id":"` + key + `","amount":"25.00","currency":"IDR","card":"4444333322221111"}`)})
			requireKeyInFlight(t, res, err, "another payment of the order taken for ours by the echoed header")
			v.requireKeys(t, "Request-Id", key, 5) // the call's budget of attempts, as for any key in flight
		})
	}
}
