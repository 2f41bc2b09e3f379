package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// An order release 1 sent, whose server's answer named it (ord_1) before
// later answers were lost, is visited by a replica with the key's header
// renamed: unknown, flagged ReviewKeyMoved. The provider's event names
// another order (ord_9): a contradiction, flagged ReviewConfirmConflict.
// conflicted took ReviewKeyMoved (unflagged to a Client on the journaled
// settings, ignoredUnflagged) for a flag a person had been told of and
// left Hooks.Review out; only ConfirmConflict fired. Review fires once.
func TestConfirmConflictOnKeyMovedFlagFiresReviewHook(t *testing.T) {
	e := newKeyMovedDeploy(t)
	e.release(false, func(_ *journal.Store, c *idem.Client) {
		_, err := c.Submit(e.ctx, e.req)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	})
	e.srv.answer()
	e.clock.Advance(time.Minute)
	e.resume(true)
	e.release(false, func(st *journal.Store, _ *idem.Client) {
		// Modelled: the one answer that reached us (202, naming the order).
		_, err := st.Update(e.ctx, idem.DefaultScope, e.req.Key, func(r *journal.Record) error {
			r.Result = &journal.Result{ResourceID: "ord_1", StatusCode: 202}
			return nil
		})
		require.NoError(t, err)
	})
	require.Equal(t, idem.ReviewKeyMoved, e.record().Review)
	orders, posts := e.srv.counts()

	var (
		mu                 sync.Mutex
		reviews, conflicts []string
	)
	e.opts = []idem.Option{idem.WithHooks(idem.Hooks{
		Review: func(_ context.Context, r *idem.Result) {
			mu.Lock()
			reviews = append(reviews, r.Review)
			mu.Unlock()
		},
		ConfirmConflict: func(_ context.Context, r *idem.Result, _ idem.Confirmation) {
			mu.Lock()
			conflicts = append(conflicts, r.Review)
			mu.Unlock()
		},
	})}
	e.release(false, func(_ *journal.Store, c *idem.Client) {
		_, err := c.Confirm(e.ctx, "", e.req.Key, idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_9",
			Source: "provider-webhook", EventID: "evt_ord_9", Reason: "order.succeeded"})
		require.ErrorIs(t, err, idem.ErrConfirmConflict)
	})
	o, p := e.srv.counts()
	require.Equal(t, [2]int{orders, posts}, [2]int{o, p}, "sent again")
	require.Equal(t, idem.ReviewConfirmConflict, e.record().Review)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{idem.ReviewConfirmConflict}, conflicts, "ConfirmConflict hook calls")
	require.Equal(t, []string{idem.ReviewConfirmConflict}, reviews, "Review hook calls")
}
