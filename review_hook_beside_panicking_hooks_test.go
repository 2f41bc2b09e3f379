package idem_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
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

// A webhook event saying an order failed contradicts its recorded
// success (the order was made: the provider's event is another
// attempt's, or wrong): Confirm keeps the success and flags the
// operation ReviewConfirmConflict, then calls the ConfirmConflict hook
// and the Review hook. A ConfirmConflict hook that panicked (an alert
// route missing) skipped the Review hook: the redelivery finds the
// confirmation recorded and tells nobody, and the person was never
// paged. It now runs once, the panic going on up to Confirm's caller.
func TestReviewHookFiresAfterPanickingConfirmConflictHook(t *testing.T) {
	var (
		mu      sync.Mutex
		reviews []string
	)
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithHooks(idem.Hooks{
		ConfirmConflict: func(context.Context, *idem.Result, idem.Confirmation) { panic("alert route missing") },
		Review: func(_ context.Context, r *idem.Result) {
			mu.Lock()
			reviews = append(reviews, r.Review)
			mu.Unlock()
		},
	})))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, err)
	require.PanicsWithValue(t, "alert route missing", func() {
		_, _ = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateFailed, "", "evt_1"))
	}, "the ConfirmConflict hook's panic reaches Confirm's caller")
	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateFailed, "", "evt_1"))
	require.ErrorIs(t, err, journal.ErrConfirmConflict, "the redelivery, which calls no hook")

	op, err := e.client.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, idem.ReviewConfirmConflict, op.Review)
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{idem.ReviewConfirmConflict}, reviews, "Review hook calls")
}
