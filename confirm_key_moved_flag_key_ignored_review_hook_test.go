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
			s, clock, release, _, sends := keyMovedThenLearnt(t)
			clock.Advance(time.Minute)
			var (
				mu      sync.Mutex
				reviews []string
			)
			hooks := idem.WithHooks(idem.Hooks{Review: func(_ context.Context, r *idem.Result) {
				mu.Lock()
				reviews = append(reviews, r.Review)
				mu.Unlock()
			}})
			release(renamed, func(c *idem.Client) {
				res, err := c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pay_2",
					Source: "provider-webhook", EventID: "evt_pay_2", Reason: "order.settled"})
				require.NoError(t, err, "Confirm()")
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, idem.ReviewMaybeTwice, res.Review, "the other sends may have charged")
			}, hooks)
			require.Equal(t, sends, len(s.charged()), "k sent again")
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []string{idem.ReviewMaybeTwice}, reviews, "Review hook calls")
		})
	}
}
