package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// revolutOrder is Revolut Merchant's order as POST /api/orders answers
// it, 201 Created (the 2023-09-01 API's Order: "id", "token", "type",
// "state", "outstanding_amount", "capture_mode", "checkout_url"…). An
// order is created "pending" and stays so until its customer pays at its
// checkout_url or in the widget its token opens; then "processing",
// "authorised", "completed" (developer.revolut.com/docs/guides/merchant/reference/order-lifecycle).
func revolutOrder(state, checkoutURL string) string {
	return `{"id":"6516e5c4-5b5a-aaf3-9e5f-1e0d2b1c9a77","token":"0adc0e3c-ab44-4f33-bcc0-534ded7354ce","type":"payment",` +
		`"state":"` + state + `","created_at":"2026-12-05T09:00:00.000000Z","updated_at":"2026-12-05T09:00:00.000000Z",` +
		`"amount":1000,"currency":"GBP","outstanding_amount":1000,"capture_mode":"automatic",` +
		`"checkout_url":"` + checkoutURL + `","enforce_challenge":"automatic"}`
}

const (
	revolutOrderID  = "6516e5c4-5b5a-aaf3-9e5f-1e0d2b1c9a77"
	revolutCheckout = "https://checkout.revolut.com/payment-link/0adc0e3c-ab44-4f33-bcc0-534ded7354ce"
)

// A Revolut Merchant order answered "state": "pending" waits for its
// customer, not for the server: it is made, and the caller needs its
// checkout_url now. Read as the key's request still running (idem's own
// "pending"), it was sent again until the budget ran out (5 POSTs, unknown,
// no body for the caller), and Resume and Run asked on while it stayed
// pending for ever, the customer never sent to the page. A "pending"
// without a checkout page (Revolut Business's transfer, a job) still
// runs.
func TestRevolutMerchantOrderPendingIsCreated(t *testing.T) {
	requireDecodes(t, []decodeRow{
		{revolutOrder("pending", revolutCheckout), 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: revolutOrderID}, true},
		{revolutOrder("PENDING", revolutCheckout), 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: revolutOrderID}, true},
		// 202 still says the work is not done.
		{revolutOrder("pending", revolutCheckout), 202, idem.Outcome{State: idem.StateProcessing, ResourceID: revolutOrderID}, true},
		// Its customer pressed Pay: the payment runs.
		{revolutOrder("processing", revolutCheckout), 200, idem.Outcome{State: idem.StateProcessing}, true},
		// No page to pay at: the server's own work, as before.
		{revolutOrder("pending", ""), 201, idem.Outcome{State: idem.StateProcessing}, true},
		{revolutOrder("pending", " "), 201, idem.Outcome{State: idem.StateProcessing}, true},
		{`{"id":"630f95f7-a3f9-abf2-b4e4-3f65281234dc","state":"pending","created_at":"2020-11-23T08:39:35.811005Z"}`, 200,
			idem.Outcome{State: idem.StateProcessing}, true},
		{`{"state":"pending","checkout_url":"` + revolutCheckout + `"}`, 201, idem.Outcome{State: idem.StateProcessing}, true},
		{`{"id":"6516e5c4","state":"pending","checkout_url":7}`, 201, idem.Outcome{State: idem.StateProcessing}, true},
		// What proves nothing still does.
		{`{"id":"6516e5c4","state":"pending","checkout_url":"` + revolutCheckout + `","error":{"code":1}}`, 201, idem.Outcome{}, false},
		{`{"jsonrpc":"2.0","id":1,"state":"pending","checkout_url":"` + revolutCheckout + `"}`, 200, idem.Outcome{State: idem.StateProcessing}, true},
	})

	requireCreatedOnce(t, "/api/orders", `{"amount":1000,"currency":"GBP","merchant_order_data":{"reference":"ord-42"}}`,
		revolutOrder("pending", revolutCheckout), revolutOrderID, revolutCheckout)
}

// requireCreatedOnce submits body to path at default settings, the key in
// its header, to a server answering 201 with answer, a resource created
// "pending" for its customer: one POST, settled succeeded as resource
// id, the answer (which names what the customer pays with, want) handed
// to the caller, journaled succeeded, nothing left for Resume to send.
func requireCreatedOnce(t *testing.T, path, body, answer, id, want string) {
	t.Helper()
	v := newVendor(t, shape{status: http.StatusCreated, body: answer})
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	req := idem.Request{Key: "ord-42", URL: v.srv.URL + path, Body: []byte(body)}
	res, err := c.Submit(t.Context(), req)
	require.NoError(t, err, "a resource waiting for its customer left unknown")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, id, res.ResourceID)
	require.Contains(t, string(res.Body), want, "the caller needs what its customer pays with")
	v.requireKeys(t, "Idempotency-Key", "ord-42", 1)

	op, err := c.Lookup(t.Context(), "", "ord-42")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State, "journaled state")
	require.Empty(t, op.Review)

	// Nothing left for Resume to ask about.
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	v.requireKeys(t, "Idempotency-Key", "ord-42", 1)
}
