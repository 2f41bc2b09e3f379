package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A key taken from a business id (the order number, "ORD-2026-0042-A")
// is a value other resources carry too: every payment of the order names
// it as its order_id. A 409 whose body is a resource is taken for the
// key's stored answer (DOKU: "DOKU system will send the same Response
// body with HTTP Status Code 409 Conflict",
// developers.doku.com/get-started-with-doku-api/idempotency-request)
// only when it shows it is about this request; the key's value under
// order_id shows only that it is about the order. The order's earlier,
// declined payment in such a 409 (the record a create collides with)
// settled ours failed, after a first attempt of ours that may have
// executed: the caller, told it failed, pays again under a new key.
// Paid, it settled ours succeeded with another payment's id. Either
// stays the key's request in flight, resent under the same key.
func TestConflictNamingTheKeyOnlyAsTheOrderDoesNotSettle(t *testing.T) {
	const key = "ORD-2026-0042-A"
	for _, status := range []string{"DECLINED", "PAID"} {
		t.Run(status, func(t *testing.T) {
			v := newVendor(t, gatewayTimeout, shape{status: http.StatusConflict,
				body: `{"id":"pmt_2026_77aa01","order_id":"` + key + `","amount":"25.00","currency":"USD","status":"` + status + `"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: v.srv.URL + "/v2/payments",
				Body: []byte(`{"order_id":"` + key + `","amount":"25.00","currency":"USD","card":"4444333322221111"}`)})
			requireKeyInFlight(t, res, err, "another payment of the order taken for ours")
			v.requireKeys(t, "Idempotency-Key", key, 5) // the call's budget of attempts, as for any key in flight
		})
	}
}
