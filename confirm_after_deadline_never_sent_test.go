package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// othersSuccess is the payment_intent.succeeded of another request's
// PaymentIntent whose metadata carries the key of ours, order-42.
var othersSuccess = idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pi_other",
	Source: "stripe", EventID: "evt_other", Reason: "payment_intent.succeeded"}

// An operation nothing of ours ever executed for (an intent journaled by
// Prepare, as an outbox's PrepareTx does, whose service then stayed down
// for three days; or one whose every send Stripe answered 429, which it
// executes nothing for, https://docs.stripe.com/rate-limits) is flagged
// by Run once the reconciliation deadline (72 h by default) has passed,
// nothing sent. A Stripe event carrying its key still cannot be about it:
// it is another request's that used the same key (a second service
// deriving keys from the same order ids; every endpoint of the account
// receives the account's events, https://docs.stripe.com/webhooks), as it
// is before the deadline (TestConfirmOfAnIntentNeverSent,
// TestConfirmWhileNothingOfOursExecuted). The flag had made the operation
// "unknown", and Confirm read only a pending one as never sent: it settled
// it succeeded with the other's PaymentIntent, the flag cleared, for the
// caller to ship an order nothing of ours paid (Do then answered nil). It
// is now flagged ReviewKeyInUse as it settles, as before the deadline.
func TestConfirmOfAnIntentNeverSentPastTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		submits int // sent before the deadline, none executed
		start   func(e *env)
	}{
		{"prepared, never sent", 0, func(e *env) {
			_, err := e.client.Prepare(e.ctx, e.req("order-42", `{"amount":700,"metadata":{"idem_key":"order-42"}}`))
			require.NoError(t, err)
		}},
		{"every send answered 429", idem.DefaultMaxAttempts, func(e *env) {
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, Key: "order-42", Count: 1000, RetryAfter: time.Second}))
			_, err := e.client.Submit(e.ctx, e.req("order-42", `{"amount":700,"metadata":{"idem_key":"order-42"}}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit()")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts := newSettleCounts()
			e := newEnv(t, noResultEndpoint(), counts.options())
			tc.start(e)
			require.Len(t, e.submits("order-42"), tc.submits, "sends before the deadline")
			// The service comes back three days later.
			e.clock.Advance(idem.DefaultReconcileDeadline + time.Hour)
			e.restart()
			ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
			defer cancel()
			ran := make(chan struct{})
			go func() { _ = e.client.Run(ctx); close(ran) }()
			require.Eventually(t, func() bool {
				op, err := e.client.Lookup(e.ctx, "", "order-42")
				return err == nil && op.Review != ""
			}, 15*time.Second, time.Millisecond)
			cancel()
			<-ran
			op, err := e.client.Lookup(e.ctx, "", "order-42")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewDeadlinePassed, op.Review)
			require.Equal(t, idem.StateUnknown, op.State)
			require.Len(t, e.submits("order-42"), tc.submits, "sent past the deadline")

			res, err := e.client.Confirm(e.ctx, "", "order-42", othersSuccess)
			require.NoError(t, err, "Confirm()")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, idem.ReviewKeyInUse, res.Review, "nothing of ours executed: the event is another request's")
			require.Equal(t, 1, counts.get(counts.hook, "order-42"), "settle hook calls")
			op, err = e.client.Lookup(e.ctx, "", "order-42")
			require.NoError(t, err)
			_, err = e.client.Do(e.ctx, op)
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Do(): nil reads \"paid\"")
			require.Len(t, e.submits("order-42"), tc.submits, "sent after the event")
		})
	}
}
