package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A server answering 202 with the payment it holds and no lookup by key
// (asyncOrders, Checkout.com's {"id":"pay_…","status":"Pending"} for a
// Cko-Idempotency-Key) accepts payment k as ord_1, then loses the key
// ("After this window of time, the request will be processed as normal",
// https://www.checkout.com/docs/payments/manage-payments/idempotency;
// modelled: early, as a cache evicting under memory pressure does). An
// event for k names ord_2 (payment_approved carries the payment's
// metadata, where the key is, and its own id,
// https://www.checkout.com/docs/developer-resources/webhooks): Confirm
// flags the open operation ReviewConfirmConflict. Another payment for
// the key tells of a server that lost it once, as ReviewMadeTwice does;
// a caller's Do of the operation resent it there anyway, the server
// made ord_2 (or a third payment), and the call reported the resend's
// answer. Do now answers ErrNeedsReview and sends nothing, as it does
// for ReviewMadeTwice. Default settings but the clock.
func TestConfirmConflictNotResentByDo(t *testing.T) {
	s := newAsyncOrders(t)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, s.srv, clock)
	s.submit(t, c)
	s.mu.Lock()
	posts := append([]string(nil), s.posts...)
	s.mu.Unlock()
	s.requireSeen(t, posts, 1)

	s.forget()
	res, err := c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_2",
		Source: "checkout.com", EventID: "evt_ord_2_approved", Reason: "payment_approved"})
	require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of another payment's event")
	require.Equal(t, idem.StateProcessing, res.State, "Confirm(): open as it was")
	require.Equal(t, idem.ReviewConfirmConflict, res.Review, "Confirm(): Review")

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	attempts := op.Attempts
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do()")
	s.requireSeen(t, posts, 1)

	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateProcessing, op.State, "journal: State")
	require.Equal(t, idem.ReviewConfirmConflict, op.Review, "journal: Review")
	require.Equal(t, "ord_1", resourceOf(op), "journal: resource")
	require.Equal(t, attempts, op.Attempts, "journal: attempts, none journaled by Do")
}
