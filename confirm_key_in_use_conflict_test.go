package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// An outbox's intent, journaled and never sent, is settled succeeded by
// another service's payment_intent.succeeded that carries the same key in
// its metadata (two services deriving keys from one order id; every
// endpoint of the account receives the account's events,
// https://docs.stripe.com/webhooks): flagged ReviewKeyInUse, and Do ends
// in ErrNeedsReview, since the success is not ours. That service's other
// PaymentIntents for the order carry the key too: one the customer
// abandoned, which it cancels (payment_intent.canceled, a status the
// intent never leaves, https://docs.stripe.com/payments/paymentintents/lifecycle),
// or one paid twice. Each contradicts the settlement and was recorded as
// ReviewConfirmConflict over ReviewKeyInUse; naming another
// PaymentIntent than the success, it disputed nothing, and Do returned
// the other service's success with a nil error: the order shipped, never
// paid by us. The key-in-use flag now stays (as ApplyConfirmation says
// later confirmations keep it) and the contradiction is still reported.
func TestConfirmConflictKeepsKeyInUse(t *testing.T) {
	for _, tt := range []struct {
		name  string
		event idem.Confirmation
	}{
		{"another intent canceled", idem.Confirmation{State: idem.StateFailed, ResourceID: "pi_abandoned",
			Source: "stripe", EventID: "evt_abandoned_canceled", Reason: "payment_intent.canceled"}},
		{"another intent succeeded", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pi_other_again",
			Source: "stripe", EventID: "evt_other_again_succeeded", Reason: "payment_intent.succeeded"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			counts := newSettleCounts()
			e := newEnv(t, noResultEndpoint(), counts.options())
			_, err := e.client.Prepare(e.ctx, e.req("order-42", `{"amount":700,"metadata":{"idem_key":"order-42"}}`))
			require.NoError(t, err)
			res, err := e.client.Confirm(e.ctx, "", "order-42", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pi_other",
				Source: "stripe", EventID: "evt_other_succeeded", Reason: "payment_intent.succeeded"})
			require.NoError(t, err, "Confirm() of the other service's success")
			require.Equal(t, idem.ReviewKeyInUse, res.Review)

			res, err = e.client.Confirm(e.ctx, "", "order-42", tt.event)
			require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of the other service's second intent")
			require.Equal(t, idem.StateSucceeded, res.State, "the settlement is kept")
			require.Equal(t, "pi_other", res.ResourceID, "the settlement is kept")
			require.Equal(t, idem.ReviewKeyInUse, res.Review, "Confirm(): Result.Review")
			require.Equal(t, 1, counts.get(counts.conflict, "order-42"), "conflict hook calls")
			require.Equal(t, 1, counts.get(counts.review, "order-42"), "review hook calls: flagged once")
			require.Equal(t, 1, counts.get(counts.hook, "order-42"), "settle hook calls")

			op, err := e.client.Lookup(e.ctx, "", "order-42")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewKeyInUse, op.Review, "journaled review")
			res, err = e.client.Do(e.ctx, op)
			// Nothing of ours was ever sent: the success is the other
			// service's, and nil would read "paid" to a caller who ships.
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Do()")
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do()")
			require.NotErrorIs(t, err, idem.ErrFailed, "Do(): a failure would invite a new payment")
			require.Equal(t, idem.StateSucceeded, res.State)
			flagged, err := e.client.List(e.ctx, idem.Filter{Review: true})
			require.NoError(t, err)
			require.Len(t, flagged, 1, "List(Review)")
			require.Empty(t, e.submits("order-42"), "nothing sent")
		})
	}
}
