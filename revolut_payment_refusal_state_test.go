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
			v, res, err := payRevolutOrder(t, payment, tt.states)
			require.Equal(t, idem.StateFailed, res.State, "a payment %s read as made; err: %v", tt.states[0], err)
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, id, res.ResourceID)
			v.requireKeys(t, "Idempotency-Key", "pay-ord-42", tt.submits)
		})
	}
}

// A Revolut Merchant payment still being authenticated or authorised
// (authentication_verified, authorisation_started, authorisation_passed,
// completing: the states before authorised, captured and completed in
// retrieve-payment-details' enum) is not paid: it may yet be declined. Its "state" beside its id
// read as a resource's status of no known word, it was a payment made,
// and the shop shipped what the issuer later declined. Under way, as
// declining and failing are: asked again with the same key until the
// payment says how it ended. "authorised" stays done: the funds are held,
// and a capture is the merchant's own later request. So is
// "authentication_challenge" done asking: the payment waits for its
// customer to pass the 3-D Secure challenge its body names, which no
// resend moves on; the caller gets that body, as for a payment created
// pending.
func TestRevolutMerchantPaymentUnderwayIsNoSuccess(t *testing.T) {
	const id = "6516e61c-d279-a454-a837-bc52ce55ed49"
	payment := func(state string) string {
		return `{"id":"` + id + `","order_id":"6516e5c4-5b5a-aaf3-9e5f-1e0d2b1c9a77","state":"` + state + `",` +
			`"created_at":"2026-12-05T09:00:00.000000Z","amount":1000,"currency":"GBP"}`
	}
	var rows []decodeRow
	for _, st := range []string{"authentication_verified", "authorisation_started", "authorisation_passed", "completing", "AUTHORISATION_STARTED"} {
		rows = append(rows, decodeRow{payment(st), 200, idem.Outcome{State: idem.StateProcessing, ResourceID: id}, true})
	}
	rows = append(rows, decodeRow{payment("authorised"), 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true},
		decodeRow{payment("authentication_challenge"), 200, idem.Outcome{State: idem.StateSucceeded, ResourceID: id}, true})
	requireDecodes(t, rows)

	// At default settings, the key in its header: asked again with the
	// same key until the payment is declined (failed) or authorised.
	for _, tt := range []struct {
		states []string
		want   idem.State
	}{
		{[]string{"authorisation_started", "declined"}, idem.StateFailed},
		{[]string{"authentication_verified", "authorisation_passed", "authorised"}, idem.StateSucceeded},
		{[]string{"authentication_challenge"}, idem.StateSucceeded},
	} {
		t.Run(tt.states[0], func(t *testing.T) {
			v, res, err := payRevolutOrder(t, payment, tt.states)
			require.Equal(t, tt.want, res.State, "a payment %s read as settled; err: %v", tt.states[0], err)
			require.Equal(t, id, res.ResourceID)
			v.requireKeys(t, "Idempotency-Key", "pay-ord-42", len(tt.states))
		})
	}
}

// payRevolutOrder pays for a Revolut Merchant order at default settings,
// the key "pay-ord-42" in its header: each submit is answered 200 with
// payment(state) for the next of states.
func payRevolutOrder(t *testing.T, payment func(string) string, states []string) (*vendor, *idem.Result, error) {
	t.Helper()
	var shapes []shape
	for _, st := range states {
		shapes = append(shapes, shape{status: http.StatusOK, body: payment(st)})
	}
	v := newVendor(t, shapes...)
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	req := idem.Request{Key: "pay-ord-42", URL: v.srv.URL + "/api/orders/6516e5c4-5b5a-aaf3-9e5f-1e0d2b1c9a77/payments",
		Body: []byte(`{"saved_payment_method":{"type":"card","id":"pm_1","initiator":"merchant"}}`)}
	res, err := c.Submit(t.Context(), req)
	return v, res, err
}
