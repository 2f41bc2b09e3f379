package idem_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Adyen does not check a merchantReference for uniqueness, and every
// payment made under it sends its own AUTHORISATION notification, naming
// its own pspReference (https://docs.adyen.com/development-resources/webhooks/webhook-types/).
// Our payment succeeded; a notification that it failed disputes that
// (flagged ReviewConfirmConflict: Do reports it for a person, never
// paid). A card-testing run against the same checkout then refuses card
// after card under the merchantReference, each a contradiction naming
// another resource: past journal.MaxConfirmations they pushed the
// disputing failure out of the record, and Do returned the success with a
// nil error, the order shipped on a disputed payment.
func TestConfirmDisputeOutlivesTheBound(t *testing.T) {
	e := newEnv(t, noResultEndpoint())
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":700}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	ours := res.ResourceID
	require.NotEmpty(t, ours)

	_, err = e.client.Confirm(e.ctx, "", "k", idem.Confirmation{State: idem.StateFailed, ResourceID: ours,
		Source: "adyen", EventID: ours + ":AUTHORISATION:false", Reason: "Refused"})
	require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of our payment's failure")
	requireDisputed := func(what string) {
		t.Helper()
		op, err := e.client.Lookup(e.ctx, "", "k")
		require.NoError(t, err)
		require.Equal(t, idem.ReviewConfirmConflict, op.Review, what)
		res, err := e.client.Do(e.ctx, op)
		require.ErrorIs(t, err, idem.ErrNeedsReview, "Do() %s", what)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do() %s", what)
		require.Equal(t, idem.StateSucceeded, res.State, what)
	}
	requireDisputed("after the dispute")

	for i := range journal.MaxConfirmations + 1 {
		psp := fmt.Sprintf("psp_refused_%02d", i)
		_, err := e.client.Confirm(e.ctx, "", "k", idem.Confirmation{State: idem.StateFailed, ResourceID: psp,
			Source: "adyen", EventID: psp + ":AUTHORISATION:false", Reason: "Refused"})
		require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of refusal %d", i)
	}
	requireDisputed("after the refusals")
	require.Len(t, e.submits("k"), 1, "submits")
}
