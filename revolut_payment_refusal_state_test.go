package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Revolut's Merchant API names a payment's status "state": pay for an
// order (POST /api/orders/{order_id}/payments) and read a payment back
// (GET /api/payments/{payment_id}) answer {"id","order_id","state",…},
// the state one of pending, authentication_challenge, …, declining,
// completing, cancelling, failing, completed, declined, soft_declined,
// cancelled, failed
// (developer.revolut.com/docs/api/merchant/operations/retrieve-payment-details).
// "soft_declined" is a decline (the issuer asks for 3DS; a new payment
// may pass), "declining" and "failing" a refusal under way. Read as a
// resource's status of no known word, each was a payment made:
// succeeded with the payment's id, and the shop ships what nobody paid
// for. Before 6dbb620 such a "state" proved nothing.
func TestRevolutMerchantPaymentRefusalIsNoSuccess(t *testing.T) {
	const id = "6516e61c-d279-a454-a837-bc52ce55ed49"
	payment := func(state string) string {
		return `{"id":"` + id + `","order_id":"6516e5c4-5b5a-aaf3-9e5f-1e0d2b1c9a77","state":"` + state + `",` +
			`"decline_reason":"do_not_honour","created_at":"2026-12-05T09:00:00.000000Z","amount":1000,"currency":"GBP"}`
	}
	requireDecodes(t, []decodeRow{
		{payment("soft_declined"), 200, idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: "soft_declined"}, true},
		{payment("SOFT_DECLINED"), 201, idem.Outcome{State: idem.StateFailed, ResourceID: id, Reason: "SOFT_DECLINED"}, true},
		{payment("declining"), 200, idem.Outcome{State: idem.StateProcessing, ResourceID: id}, true},
		{payment("failing"), 200, idem.Outcome{State: idem.StateProcessing, ResourceID: id}, true},
		{`{"id":"pay_1","status":"declining"}`, 200, idem.Outcome{State: idem.StateProcessing, ResourceID: "pay_1"}, true},
	})

	// At default settings, the key in its header: a soft decline fails
	// at once; a decline under way is asked again, with the same key,
	// until the payment says "declined".
	for _, tt := range []struct {
		states  []string
		submits int
	}{
		{[]string{"soft_declined"}, 1},
		{[]string{"declining", "declined"}, 2},
		{[]string{"failing", "failed"}, 2},
	} {
		t.Run(tt.states[0], func(t *testing.T) {
			var shapes []shape
			for _, st := range tt.states {
				shapes = append(shapes, shape{status: http.StatusOK, body: payment(st)})
			}
			v := newVendor(t, shapes...)
			c := clientFor(t, v.srv, idemtest.NewClock(epoch))
			req := idem.Request{Key: "pay-ord-42", URL: v.srv.URL + "/api/orders/6516e5c4-5b5a-aaf3-9e5f-1e0d2b1c9a77/payments",
				Body: []byte(`{"saved_payment_method":{"type":"card","id":"pm_1","initiator":"merchant"}}`)}

			res, err := c.Submit(t.Context(), req)
			require.Equal(t, idem.StateFailed, res.State, "a payment %s read as made; err: %v", tt.states[0], err)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, id, res.ResourceID)
			v.requireKeys(t, "Idempotency-Key", "pay-ord-42", tt.submits)
		})
	}
}
