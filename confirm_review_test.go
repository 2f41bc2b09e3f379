package idem_test

import (
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
	counts := newSettleCounts()
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)), counts.options())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: time.Hour}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

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
