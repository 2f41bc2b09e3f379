package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestConfirmConflictOnFlagged: a confirmation that contradicts an
// operation the driver has flagged for review already calls
// Hooks.ConfirmConflict, but not Hooks.Review a second time: the hook's
// contract is "when the operation was not flagged already".
func TestConfirmConflictOnFlagged(t *testing.T) {
	counts, e := processingEnv(t)

	// Past the key window an explicit Do flags it (ReviewKeyExpired).
	e.clock.Advance(idem.DefaultKeyRetention + time.Minute)
	op, err := e.client.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	_, err = e.client.Do(e.ctx, op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotEmpty(t, e.record("k").Review, "flagged by the driver")
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls after the driver flagged it")

	res, err := e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "ord_other", "evt_1"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	require.Equal(t, idem.ReviewConfirmConflict, res.Review)
	require.Equal(t, 1, counts.get(counts.conflict, "k"), "ConfirmConflict hook calls")
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls: the operation was flagged already")
}

// TestConfirmConflictDuringDrive: a confirmation that contradicts an open
// operation while a call drives it flags the operation and calls
// Hooks.Review; the call, ending with the operation still open and
// flagged, must not call it again for that same flagging.
func TestConfirmConflictDuringDrive(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	var confirmErr error
	var c *idem.Client
	clk := &sleepHookClock{Clock: e.clock, fn: func() {
		_, confirmErr = c.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "ord_other", "evt_1"))
	}}
	var err error
	c, err = idem.New(e.replica(), append(e.baseOpts(), idem.WithClock(clk), idem.WithHooks(idem.Hooks{
		Review: func(_ context.Context, r *idem.Result) { counts.add(counts.review, r.Key) },
	}))...)
	require.NoError(t, err)
	defer c.Close()

	res, err := c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, confirmErr, idem.ErrConfirmConflict, "the webhook's Confirm() during the call")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit()")
	require.True(t, res.State == idem.StateProcessing || res.State == idem.StateUnknown, "state %s", res.State)
	require.Equal(t, idem.ReviewConfirmConflict, e.record("k").Review)
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls for one flagging")
}

// TestConfirmSettlingKeepsConflict: a confirmation that settles an open
// operation flagged by an earlier, contradicting confirmation keeps the
// flag: the contradiction is still unexplained. Adyen does not check a
// merchantReference for uniqueness: a shopper who paid in two checkout
// sessions opened for one order makes two payments, each with its own
// pspReference and the same merchantReference (Adyen's help centre, "Why
// do I see duplicate payments?"). With the key carried there, the
// AUTHORISATION success=true of the other payment (psp_copy) arrives while
// our request (answered Received: processing, ord_000001) is open, then
// ours settles it. The shopper paid twice; the flag that tells a person
// was erased by the second notification, while a settlement by the driver
// keeps it (setReview).
func TestConfirmSettlingKeepsConflict(t *testing.T) {
	counts, e := processingEnv(t)
	require.Equal(t, "ord_000001", e.record("k").Result.ResourceID, "the processing answer's resource")

	_, err := e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "psp_copy", "evt_copy"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	res, err := e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "ord_000001", "evt_ours"))
	require.NoError(t, err, "Confirm() of our own resource")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, idem.ReviewConfirmConflict, res.Review, "Result.Review after it settled")
	require.Equal(t, idem.ReviewConfirmConflict, e.record("k").Review, "journaled review after it settled")
	flagged, err := e.client.List(e.ctx, idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review)")
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls: one flagging")
	require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")
}

// TestConfirmConflictAfterResolve: a contradiction that arrives after a
// person resolved an earlier one flags the operation anew, and the Review
// hook (the one that pages someone) is called again: the earlier conflict
// was settled, this one is not. Adyen does not check a merchantReference
// for uniqueness (help centre, "Why do I see duplicate payments?"): a
// shopper who paid in several sessions opened for one order makes a
// payment per session, each with its own pspReference, and each
// AUTHORISATION success=true carries our key.
func TestConfirmConflictAfterResolve(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, counts.options())
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, err)

	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "psp_copy1", "evt_copy1"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls after the first contradiction")
	_, err = e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "psp_copy1 refunded", By: "ops"})
	require.NoError(t, err)
	require.Empty(t, e.record("k").Review, "resolved")

	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "psp_copy2", "evt_copy2"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	require.Equal(t, idem.ReviewConfirmConflict, e.record("k").Review, "flagged again")
	require.Equal(t, 2, counts.get(counts.conflict, "k"), "ConfirmConflict hook calls")
	require.Equal(t, 2, counts.get(counts.review, "k"), "Review hook calls: one per flagging")
}
