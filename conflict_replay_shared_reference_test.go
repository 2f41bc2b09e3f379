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

// A plain "reference" is, at many APIs, the text the payer or recipient
// sees on a bank statement, which payments share: Wise's transfer
// reference ("Recipient will see this reference text in their bank
// statement", api-docs.wise.com/api-reference/transfer#create, as
// pipedream.com/apps/wise/actions/create-transfer quotes it), a
// payment's reference that "can be either an invoice ID or a customer
// reference" (Circle's refCode,
// developers.circle.com/cpn/references/payment-reference). An invoice
// paid in two equal instalments names it on both. The first
// instalment, paid, in a 409 that is not the key's answer was taken for
// the second's (same reference, same amount and currency, so nothing to
// tell them apart): settled succeeded with the first's id, and the second
// never collected. Only a reference named as the merchant's own for this
// request (merchantRefNum, client_reference_id) shows a 409 is ours.
func TestConflictCarryingAnInstalmentOfTheSameInvoiceDoesNotSettle(t *testing.T) {
	v := newVendor(t, gatewayTimeout, shape{status: http.StatusConflict,
		body: `{"id":"PM0001A2B3C4D5","reference":"INV-2026-0042","amount":"25.00","currency":"EUR","status":"paid"}`})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/payments",
		Body: []byte(`{"reference":"INV-2026-0042","amount":"25.00","currency":"EUR","mandate":"MD000AB123"}`)})
	requireKeyInFlight(t, res, err, "the invoice's first instalment taken for the second")
	v.requireKeys(t, "Idempotency-Key", "k", 5) // the call's budget of attempts, as for any key in flight
}
