package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestPruneKeepsConfirmConflict: a settled operation that a confirmation
// contradicted is flagged for a person, and pruning must not delete it
// before one has looked (Resolve). Stripe keeps a PaymentIntent after a
// declined confirmation (402 card_declined, status
// requires_payment_method); the customer then pays it with another card
// from the browser and payment_intent.succeeded arrives, with the
// metadata (our key) of the request that the journal settled as failed.
// The customer is charged and the journal says failed: only a person can
// ship the order or refund it. Stripe redelivers an event for up to three
// days, so such an event can reach a record near the end of its retention.
func TestPruneKeepsConfirmConflict(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, counts.options())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "k"}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrFailed)

	e.clock.Advance(idem.DefaultRetainSettled - time.Hour)
	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "pi_1", "evt_succeeded"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict)
	require.Equal(t, 1, counts.get(counts.review, "k"), "Review hook calls")

	e.clock.Advance(2 * time.Hour)
	n, err := e.client.Prune(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "Prune() deleted a record flagged for review")
	flagged, err := e.client.List(e.ctx, idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review) after Prune()")
	require.Equal(t, idem.ReviewConfirmConflict, flagged[0].Review)

	// Once a person has settled it, it is retained from then, and pruned.
	_, err = e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, ResourceID: "pi_1", Reason: "paid with a second card", By: "ops"})
	require.NoError(t, err)
	n, err = e.client.Prune(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "Prune() right after Resolve()")
	e.clock.Advance(idem.DefaultRetainSettled + time.Hour)
	n, err = e.client.Prune(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "Prune() a retention after Resolve()")
}
