package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A short key (a payout row's number, "1001") is a value other requests'
// references hold too: another order numbered 1001 is paid out under
// merchantRefNum "1001" (Paysafe's standalone credit, Interchecks'
// instant withdrawal: {"id":…,"merchantRefNum":…,"status":"COMPLETED"},
// developer.paysafe.com/en/api-docs/payments-api/add-payment-methods/interchecks-instant-withdraw/).
// That payout in a 409 that is not the key's answer (the record a create
// collides with) was taken for ours by the key's value at its
// merchantRefNum, which a request's own reference is trusted for only
// when distinctive: FAILED, it settled ours failed after a first attempt
// that may have executed, and the caller, told so, pays out again under
// a new key; COMPLETED, it settled ours with another payout's id, ours
// maybe never made. Either stays the key's request in flight, resent
// under the same key.
func TestConflictNamingAShortKeyOnlyAsAnotherReferenceDoesNotSettle(t *testing.T) {
	const key = "1001"
	for _, status := range []string{"FAILED", "COMPLETED"} {
		t.Run(status, func(t *testing.T) {
			v := newVendor(t, gatewayTimeout, shape{status: http.StatusConflict,
				body: `{"id":"11ed70b2-d9f3-462f-bf3f-e0ce489b7e43","paymentType":"CARD","merchantRefNum":"` + key +
					`","currencyCode":"USD","amount":987,"status":"` + status + `"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: v.srv.URL + "/paymenthub/v1/standalonecredits",
				Body: []byte(`{"paymentHandleToken":"CkhCQct6njVNEJV","amount":987,"merchantRefNum":"payout-2026-0042","currencyCode":"USD"}`)})
			requireKeyInFlight(t, res, err, "another order's payout taken for ours")
			v.requireKeys(t, "Idempotency-Key", key, 5) // the call's budget of attempts, as for any key in flight
		})
	}
}
