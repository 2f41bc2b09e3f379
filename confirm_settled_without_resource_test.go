package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// An operation a person settled succeeded without naming the payment
// (Resolution.ResourceID is "what the server created, if known") has no
// resource id recorded. Adyen does not check a merchantReference for
// uniqueness: a shopper who paid in two checkout sessions for one order
// made two payments, each with its own pspReference and an AUTHORISATION
// success "true" carrying the merchantReference, the key
// (https://docs.adyen.com/development-resources/webhooks/webhook-types/).
// Each agreed with the settlement, and the order paid twice went
// unnoticed. The first that names a payment now names the operation's,
// and the second is a contradiction, flagged for a person.
func TestConfirmSettledWithoutResourceSecondPayment(t *testing.T) {
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), counts.options())
	_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":700}`))
	require.NoError(t, err)
	_, err = e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, Reason: "paid, per the shopper's bank statement", By: "ops@example.com"})
	require.NoError(t, err)

	authorised := func(psp string) idem.Confirmation {
		return idem.Confirmation{State: idem.StateSucceeded, ResourceID: psp, Source: "adyen", EventID: psp + ":AUTHORISATION:true", Reason: "Authorised"}
	}
	res, err := e.client.Confirm(e.ctx, "", "k", authorised("psp_first"))
	require.NoError(t, err, "Confirm() of the first payment")
	require.Empty(t, res.Review)
	res, err = e.client.Confirm(e.ctx, "", "k", authorised("psp_second"))
	require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of the second payment")
	require.Equal(t, idem.ReviewConfirmConflict, res.Review)
	require.Equal(t, 1, counts.get(counts.conflict, "k"), "conflict hook calls")
	flagged, err := e.client.List(e.ctx, idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review)")
	require.Empty(t, e.submits("k"), "nothing sent")
}
