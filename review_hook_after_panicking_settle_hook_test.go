package idem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// keyMovedThenLearnt's payment "k" (every send charged by an endpoint
// that ignores the key, modelled on Solidgate's, answers lost) is
// settled succeeded, ReviewMaybeTwice, by the provider's webhook
// (Confirm) or by a Resume visit querying the order's status, while the
// Settle hook panics (metrics labelled by a field some results lack).
// The Review hook, called after it, was skipped: the settlement
// committed, no later call flags it again, and the person who must
// check for a second charge was never told. It now runs once, and the
// Settle hook's panic still goes on up (to Confirm's caller; a visit's
// is caught and logged).
func TestReviewHookFiresAfterPanickingSettleHook(t *testing.T) {
	panicking := idem.Hooks{Settle: func(context.Context, *idem.Result) { panic("metrics label missing") }}
	t.Run("confirm", func(t *testing.T) {
		reviews := settleKeyMovedThenLearnt(t, true, panicking, func(t *testing.T, c *idem.Client) {
			require.PanicsWithValue(t, "metrics label missing", func() {
				_, _ = c.Confirm(t.Context(), "", "k", payment2Settled)
			}, "the Settle hook's panic reaches Confirm's caller")
		})
		require.Equal(t, []string{idem.ReviewMaybeTwice}, reviews, "Review hook calls")
	})
	t.Run("resume visit", func(t *testing.T) {
		reviews := settleKeyMovedThenLearnt(t, true, panicking, func(t *testing.T, c *idem.Client) {
			_, err := c.Resume(t.Context())
			require.NoError(t, err, "Resume(): the visit's panic caught")
		})
		require.Equal(t, []string{idem.ReviewMaybeTwice}, reviews, "Review hook calls")
	})
}
