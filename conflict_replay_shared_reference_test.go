package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A reference member a request shares with other requests is no proof
// that a 409's resource is ours: the shopper's (Adyen's shopperReference,
// "your reference to uniquely identify this shopper",
// docs.adyen.com/api-explorer/Checkout/latest/post/payments), or the
// series' a recurring payment names (Request Network's
// originalRequestPaymentReference, "Payment reference of the original
// request for recurring payments",
// requestnetwork-add-near-docs.mintlify.app/api-reference/request/create-a-new-request-1).
// Last month's payment of the series, same shopper and amount, in a 409
// that is not the key's answer (the record a create collides with) was
// taken for this month's: settled succeeded with another payment's id,
// and this month's never charged.
func TestConflictCarryingAPaymentOfTheSameShopperDoesNotSettle(t *testing.T) {
	for _, tt := range []struct{ name, member, value string }{
		{"shopperReference", "shopperReference", "shopper-00042-acme"},
		{"originalRequestPaymentReference", "originalRequestPaymentReference", "0x8f3a91c2d4e5b607"},
		{"customer_reference", "customer_reference", "cust-00042-acme"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendor(t, gatewayTimeout, shape{status: http.StatusConflict,
				body: `{"id":"pmt_2026_10_77aa01","` + tt.member + `":"` + tt.value + `","amount":"49.00","currency":"USD","status":"PAID"}`})
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v2/payments",
				Body: []byte(`{"` + tt.member + `":"` + tt.value + `","amount":"49.00","currency":"USD","card":"4444333322221111"}`)})
			requireKeyInFlight(t, res, err, "last month's payment taken for this one")
			v.requireKeys(t, "Idempotency-Key", "k", 5) // the call's budget of attempts, as for any key in flight
		})
	}
}
