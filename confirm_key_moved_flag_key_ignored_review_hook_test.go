package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Release 1's sends of payment "k" to an endpoint that ignores the key
// (keyIgnoringCharges, modelled on Solidgate's: every POST a charge) all
// lost their answers; a renamed replica flagged it ReviewKeyMoved, then
// learnt the endpoint. The provider's webhook, to either Client, settles
// it succeeded, ReviewMaybeTwice: a possible second charge. Confirm fired
// Hooks.Review only for a record with no flag at all, so ReviewKeyMoved
// (unflagged to a Client on the journaled settings, ignoredUnflagged)
// kept it from a person: told only to the Settle hook. It fires once.
func TestConfirmKeyMovedFlagKeyIgnoredFiresReviewHook(t *testing.T) {
	for _, renamed := range []bool{true, false} {
		t.Run(map[bool]string{true: "renamed replica", false: "journaled settings"}[renamed], func(t *testing.T) {
			reviews := settleKeyMovedThenLearnt(t, renamed, idem.Hooks{}, func(t *testing.T, c *idem.Client) {
				res, err := c.Confirm(t.Context(), "", "k", payment2Settled)
				require.NoError(t, err, "Confirm()")
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, idem.ReviewMaybeTwice, res.Review, "the other sends may have charged")
			})
			require.Equal(t, []string{idem.ReviewMaybeTwice}, reviews, "Review hook calls")
		})
	}
}

// payment2Settled is the provider's webhook event for pay_2, one of
// keyMovedThenLearnt's charges for "k".
var payment2Settled = idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pay_2",
	Source: "provider-webhook", EventID: "evt_pay_2", Reason: "order.settled"}

// settleKeyMovedThenLearnt runs settle on a Client (renamed: release 2's
// settings) with hooks, their Review recording its calls, on
// keyMovedThenLearnt's journal a minute later; k must then be succeeded,
// ReviewMaybeTwice, and not sent again. It returns the reasons the
// Review hook was called with.
func settleKeyMovedThenLearnt(t *testing.T, renamed bool, hooks idem.Hooks, settle func(*testing.T, *idem.Client)) []string {
	t.Helper()
	s, clock, release, _, sends := keyMovedThenLearnt(t)
	clock.Advance(time.Minute)
	var (
		mu      sync.Mutex
		reviews []string
	)
	hooks.Review = func(_ context.Context, r *idem.Result) {
		mu.Lock()
		reviews = append(reviews, r.Review)
		mu.Unlock()
	}
	release(renamed, func(c *idem.Client) {
		settle(t, c)
		op, err := c.Lookup(t.Context(), "", "k")
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, op.State)
		require.Equal(t, idem.ReviewMaybeTwice, op.Review, "the other sends may have charged")
	}, idem.WithHooks(hooks))
	require.Equal(t, sends, len(s.charged()), "k sent again")
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), reviews...)
}
