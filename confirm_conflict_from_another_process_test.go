package idem_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Two processes share a journal: the payment service (b) and the webhook
// handler (a). b's payment k is accepted as ord_1 by a server answering
// 202 with the payment it holds and no lookup by key (asyncOrders,
// Checkout.com's {"id":"ord_…","status":"Pending"}), whose key cache
// forgets: "Subsequent requests with the same key will return the same
// HTTP status code and response body as the original request, providing
// that it was processed successfully ... After this window of time, the
// request will be processed as normal"
// (https://www.checkout.com/docs/developer-resources/api/idempotency);
// modelled: the cache loses it early, as Redis evicting under maxmemory
// does. b's resend, which asks how the payment stands, reaches it after
// it lost k: a second payment, ord_2, whose answer is lost as b's caller
// gives up. ord_2's payment_approved event carries k in its metadata
// (https://www.checkout.com/docs/developer-resources/webhooks) and comes
// to a while b's Resume, having judged the resend on the unflagged
// record, journals it: a's Confirm, naming another payment than the one
// recorded, flags k ReviewConfirmConflict (open: processing ord_1), and
// b's attempt is committed on that flagged record. b sent it to the
// server, which had lost the key again: ord_3, a third payment, where
// Resume and Run never resend a flagged operation. It is closed unsent
// now, the flag kept.
func TestConfirmConflictFromAnotherProcessStopsTheResend(t *testing.T) {
	var (
		mu      sync.Mutex
		stop    context.CancelFunc // b's caller gives up
		reviews []string
	)
	s := newAsyncOrders(t)
	s.before = func(n int) bool {
		if n != 2 {
			return false
		}
		// The cache lost k before b's resend came: ord_2 is made, and
		// its answer lost as b's caller gives up.
		clear(s.keys)
		mu.Lock()
		stop()
		mu.Unlock()
		return true
	}
	clock := idemtest.NewClock(epoch)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	conflicts := 0
	newClient := func(st idem.Store, name string) *idem.Client {
		c, err := idem.New(st, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock),
			idem.WithHooks(idem.Hooks{
				Review: func(_ context.Context, r *idem.Result) {
					mu.Lock()
					reviews = append(reviews, name+" "+r.Key+" "+r.Review)
					mu.Unlock()
				},
				ConfirmConflict: func(context.Context, *idem.Result, idem.Confirmation) {
					mu.Lock()
					conflicts++
					mu.Unlock()
				},
			}))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a := newClient(store, "a")
	bStore := &landsFirstStore{Store: store}
	b := newClient(bStore, "b")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	mu.Lock()
	stop = cancel
	mu.Unlock()
	res, err := b.Submit(ctx, idem.Request{Key: "k", URL: s.srv.URL + "/orders", Body: []byte(`{"amount":100,"currency":"EUR"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "b.Submit(k)")
	require.Equal(t, idem.StateProcessing, res.State, "b.Submit(k): State")
	require.Equal(t, "ord_1", res.ResourceID, "b.Submit(k): ResourceID")
	s.requireSeen(t, []string{"k", "k"}, 2)

	s.forget() // the cache loses keys again
	event := idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_2", Source: "checkout.com",
		EventID: "evt_ord_2_approved", Reason: "payment_approved"}
	var confirmRes *idem.Result
	var confirmErr error
	bStore.mu.Lock()
	bStore.first = func() { confirmRes, confirmErr = a.Confirm(t.Context(), "", "k", event) }
	bStore.mu.Unlock()
	sum, err := b.Resume(t.Context())
	require.NoError(t, err, "b.Resume()")
	require.ErrorIs(t, confirmErr, idem.ErrConfirmConflict, "a.Confirm(ord_2)")
	require.Equal(t, idem.StateProcessing, confirmRes.State, "a.Confirm(ord_2): open as it was")
	require.Equal(t, idem.ReviewConfirmConflict, confirmRes.Review, "a.Confirm(ord_2): Review")
	require.Equal(t, 1, sum.Review, "b.Resume(): flagged")
	s.requireSeen(t, []string{"k", "k"}, 2)

	op, err := b.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateProcessing, op.State, "journal: State")
	require.Equal(t, "ord_1", resourceOf(op), "journal: resource")
	require.Equal(t, idem.ReviewConfirmConflict, op.Review, "journal: Review, a's")
	require.Equal(t, 3, op.Attempts, "journal: attempts, two sends and the one not sent")
	requireLastUnsent(t, store, "k")

	// Flagged, the operation is queried only, and it has no result
	// endpoint: later visits send nothing, nor journal an attempt they
	// would close unsent (resendBlock judges the flag before submit
	// does, blockSince).
	clock.Advance(idem.DefaultReconcileInterval)
	_, err = b.Resume(t.Context())
	require.NoError(t, err, "b.Resume() again")
	s.requireSeen(t, []string{"k", "k"}, 2)
	op, err = b.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, 3, op.Attempts, "journal: attempts after the later Resume")

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, conflicts, "ConfirmConflict hook calls")
	require.Equal(t, []string{"a k " + idem.ReviewConfirmConflict}, reviews, "Review hook calls")
}

// requireSeen checks the key of every submit and the orders made.
func (s *asyncOrders) requireSeen(t *testing.T, posts []string, orders int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, posts, s.posts, "submits, by key")
	require.Equal(t, orders, s.orders, "orders")
}
