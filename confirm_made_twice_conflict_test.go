package idem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A server answering 202 with the payment it holds (Checkout.com's
// {"id":"pay_…","status":"Pending"} for a Cko-Idempotency-Key, with no
// lookup by key) lost the key, and idem's resend made a second payment:
// the operation stays open, flagged ReviewMadeTwice, never resent
// (TestProcessingResentToAServerThatLostTheKeyIsFlagged). The second
// payment's event (payment_approved carries the payment's metadata,
// where the key is, and its own id,
// https://www.checkout.com/docs/developer-resources/webhooks) names
// another resource than the one recorded: a contradiction, recorded as
// ReviewConfirmConflict in the place of ReviewMadeTwice, and the resend
// that flag had stopped went out again to the server that loses keys: a
// third payment. The open operation now keeps ReviewMadeTwice, and
// nothing is resent. Default settings but the clock.
func TestConfirmConflictKeepsMadeTwiceUnsent(t *testing.T) {
	s := newAsyncOrders(t)
	clock := idemtest.NewClock(epoch)
	conflicts := 0
	c := clientFor(t, s.srv, clock, idem.WithHooks(idem.Hooks{
		ConfirmConflict: func(context.Context, *idem.Result, idem.Confirmation) { conflicts++ },
	}))
	s.submit(t, c)
	s.forget()
	resumeThrice(t, c, clock)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewMadeTwice, op.Review, "the second payment flagged it")
	s.mu.Lock()
	posts, orders := len(s.posts), s.orders
	s.mu.Unlock()
	require.Equal(t, 2, orders, "payments before the event")

	s.forget() // it loses keys again
	res, err := c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_2",
		Source: "checkout.com", EventID: "evt_ord_2_approved", Reason: "payment_approved"})
	require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of the second payment's event")
	require.Equal(t, idem.StateProcessing, res.State, "open as it was")
	require.Equal(t, idem.ReviewMadeTwice, res.Review, "Confirm(): Result.Review")
	require.Equal(t, 1, conflicts, "conflict hook calls")

	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do()")
	resumeThrice(t, c, clock)
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewMadeTwice, op.Review, "journaled review")
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, posts, len(s.posts), "submits after the event")
	require.Equal(t, 2, s.orders, "payments")
}
