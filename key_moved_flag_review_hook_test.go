package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// ReviewKeyMoved speaks of the Client that visited the operation: release
// 1's Run drives an operation flagged only so as unflagged, and flags it
// ReviewDeadlinePassed once its reconciliation deadline has passed. The
// drive took the earlier flag for one a person had been told of and left
// Hooks.Review out: the order, never sent, now waiting on a person, was
// reported to nobody on release 1. The hook fires once, for the new flag.
func TestKeyMovedFlagLaterFlagFiresReviewHook(t *testing.T) {
	e := newKeyMovedDeploy(t)
	e.prepare(false)
	e.clock.Advance(time.Hour)
	e.resume(true)
	require.Equal(t, idem.ReviewKeyMoved, e.record().Review)

	var (
		mu      sync.Mutex
		reviews []string
	)
	e.opts = []idem.Option{idem.WithHooks(idem.Hooks{Review: func(_ context.Context, r *idem.Result) {
		mu.Lock()
		reviews = append(reviews, r.Review)
		mu.Unlock()
	}})}
	e.clock.Advance(idem.DefaultReconcileDeadline)
	e.run(func(op *idem.Operation) bool { return op.Review == idem.ReviewDeadlinePassed })
	orders, posts := e.srv.counts()
	require.Equal(t, [2]int{0, 0}, [2]int{orders, posts}, "sent past its deadline")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{idem.ReviewDeadlinePassed}, reviews, "Review hook calls on release 1")
}
