package idem_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// pausedClock is a manual clock whose Sleep says so on sleeping and
// waits for wake (or ctx) before moving the clock on: a test acts while
// the call waits to resend.
type pausedClock struct {
	*idemtest.Clock
	sleeping, wake chan struct{}
}

func (p pausedClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case p.sleeping <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-p.wake:
		return p.Clock.Sleep(ctx, d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// submitted is how a Submit ended.
type submitted struct {
	res *idem.Result
	err error
}

// submitOrder42 submits a Stripe PaymentIntent create for order 42, with
// its key in the metadata, to base, and reports how the call ended.
func submitOrder42(t *testing.T, c *idem.Client, base string) <-chan submitted {
	done := make(chan submitted, 1)
	go func() {
		res, err := c.Submit(t.Context(), idem.Request{Key: "order-42", URL: base + "/v1/payment_intents",
			Body: []byte(`{"amount":700,"metadata":{"idem_key":"order-42"}}`)})
		done <- submitted{res, err}
	}()
	return done
}

// While a call waits to resend after answers that say nothing of ours
// executed, an event carrying the key is another request's, as it is for
// an operation never sent (TestConfirmOfAnIntentNeverSent). Stripe answers
// 409 idempotency_key_in_use while another request holds the key, and 429
// for a request it rate-limited, neither executed
// (https://docs.stripe.com/idempotency, https://docs.stripe.com/rate-limits);
// every endpoint of the account receives the account's events
// (https://docs.stripe.com/webhooks), and a second service deriving keys
// from the same order ids puts the same key in its PaymentIntent's
// metadata. Its payment_intent.succeeded, confirmed during the wait,
// settled ours succeeded with its PaymentIntent, unflagged: the call ended
// with a nil error, "paid", and ours was never sent again. It is now
// flagged ReviewKeyInUse as it settles, and the call ends in
// ErrNeedsReview, nothing resent.
func TestConfirmWhileNothingOfOursExecuted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first shape
	}{
		{"409 key in use", shape{status: http.StatusConflict, body: `{"error":{"code":"idempotency_key_in_use","type":"invalid_request_error",` +
			`"message":"There is currently another in-progress request using this Stripe API key and idempotency key."}}`}},
		{"429 rate limited", shape{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"1"}},
			body: `{"error":{"code":"rate_limit","type":"invalid_request_error","message":"Too many requests hit the API too quickly."}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVendor(t, tc.first, shape{status: http.StatusOK, body: `{"id":"pi_ours","status":"succeeded"}`})
			clock := pausedClock{Clock: idemtest.NewClock(epoch), sleeping: make(chan struct{}), wake: make(chan struct{})}
			var reviews atomic.Int32
			c := clientFor(t, v.srv, clock.Clock, idem.WithClock(clock),
				idem.WithHooks(idem.Hooks{Review: func(context.Context, *idem.Result) { reviews.Add(1) }}))

			done := submitOrder42(t, c, v.srv.URL)
			for waiting := false; !waiting; {
				select {
				case <-clock.sleeping:
					// After the first answer, the wait to resend; before
					// it, one that sends nothing.
					if waiting = v.posts() > 0; !waiting {
						clock.wake <- struct{}{}
					}
				case o := <-done:
					t.Fatalf("Submit ended without waiting to resend: %v", o.err)
				}
			}
			v.requireKeys(t, "Idempotency-Key", "order-42", 1)

			res, err := c.Confirm(t.Context(), "", "order-42", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pi_other",
				Source: "stripe", EventID: "evt_other", Reason: "payment_intent.succeeded"})
			require.NoError(t, err, "Confirm()")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, idem.ReviewKeyInUse, res.Review, "nothing of ours executed: the event is another request's")
			require.EqualValues(t, 1, reviews.Load(), "review hook calls")

			close(clock.wake)
			o := <-done
			require.ErrorIs(t, o.err, idem.ErrNeedsReview, "Submit(): nil reads \"paid\"")
			require.ErrorIs(t, o.err, idem.ErrUnknownOutcome, "Submit()")
			require.NotErrorIs(t, o.err, idem.ErrFailed, "Submit(): a failure would invite a new payment")
			require.Equal(t, idem.ReviewKeyInUse, o.res.Review)
			v.requireKeys(t, "Idempotency-Key", "order-42", 1)
		})
	}
}
