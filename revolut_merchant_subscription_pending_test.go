package idem_test

import (
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

// A Revolut Merchant subscription answered "state": "pending" beside its
// setup order waits for its customer to pay that order, as an order
// pending beside its checkout_url does: made, and the caller needs the
// setup order's id now to send its customer to pay. Read as the key's
// request still running, it was sent again until the budget ran out
// (5 POSTs, unknown, no body for the caller), and Resume and Run asked
// on while it stayed pending for ever.
//
// The answer is POST /api/subscriptions's 201: created "pending", "not
// yet active ... awaiting the first payment or setup completion", with
// the "setup_order_id" of the order its customer pays to start it (the
// Subscription schema and its Res-Subscription-Setup-Order example;
// developer.revolut.com/docs/merchant/create-subscription: "The
// subscription is created in a pending state with a setup_order_id in
// the response").
func TestRevolutMerchantSubscriptionPendingIsCreated(t *testing.T) {
	const id, setupOrder = "550e8400-e29b-41d4-a716-446655440000", "a50e8400-e29b-41d4-a716-446655440005"
	created := `{"id":"` + id + `","external_reference":"ord-42","state":"pending",` +
		`"customer_id":"650e8400-e29b-41d4-a716-446655440001","plan_id":"750e8400-e29b-41d4-a716-446655440002",` +
		`"plan_variation_id":"850e8400-e29b-41d4-a716-446655440003","payment_method_type":"automatic",` +
		`"created_at":"2025-06-05T21:00:00.036001Z","updated_at":"2025-06-05T21:00:00.036001Z",` +
		`"setup_order_id":"` + setupOrder + `","current_cycle_id":"a31627fb-b037-4566-8d7b-f380c1f44653"}`
	requireDecodes(t, []decodeRow{
		{created, 201, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		// No setup order to pay: the server's own work, as before.
		{strings.Replace(created, setupOrder, "", 1), 201, idem.Outcome{State: idem.StateProcessing}, true},
		{`{"state":"pending","setup_order_id":"` + setupOrder + `"}`, 201, idem.Outcome{State: idem.StateProcessing}, true},
	})
	requireCreatedOnce(t, "/api/subscriptions",
		`{"plan_variation_id":"850e8400-e29b-41d4-a716-446655440003","customer_id":"650e8400-e29b-41d4-a716-446655440001","external_reference":"ord-42"}`,
		created, id, setupOrder)
}
