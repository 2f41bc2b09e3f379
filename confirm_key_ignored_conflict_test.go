package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Solidgate's endpoints differ in whether they de-duplicate by the key,
// and an answer says so ("Idempotency-Status: ignored",
// https://api-docs.solidgate.com/api/v2/idempotent-requests). A payment
// answered 202, pay_1 processing, by an answer that did not say it, is
// sent again; the resend charges (pay_2) and its answer is lost as the
// caller stops waiting. Another payment's answer then says the endpoint
// ignores the key, and Resume does not resend what may have executed:
// flagged ReviewKeyIgnored, open, pay_1 recorded. pay_2's webhook
// (Solidgate sends an order's status changes,
// https://docs.solidgate.com/payments/integrate/webhooks) names another
// payment than pay_1: a contradiction. ReviewConfirmConflict replaced
// ReviewKeyIgnored, and after a restart nothing told the new process that
// the endpoint ignores the key (it learns that again from the open
// operations flagged ReviewKeyIgnored): Do resent the payment, one more
// charge. The open operation now keeps ReviewKeyIgnored, and nothing is
// resent; the event that settles it later flags it ReviewMaybeTwice, the
// contradiction recorded beside it.
func TestConfirmConflictKeepsKeyIgnoredUnsent(t *testing.T) {
	var (
		mu      sync.Mutex
		charges int
		marked  bool // the endpoint's answers say it ignores the key
		onLost  func()
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		charges++ // the key is ignored: every request charges
		n, mark, lost := charges, marked, onLost
		mu.Unlock()
		if n == 2 {
			// The resend charged, and its answer is lost as its caller
			// stops waiting.
			lost()
			dropConnection(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !mark {
			w.WriteHeader(http.StatusAccepted)
			_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"processing"}`, n)
			return
		}
		w.Header().Set("Idempotency-Status", "ignored")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, n)
	}))
	t.Cleanup(srv.Close)
	charged := func() int {
		mu.Lock()
		defer mu.Unlock()
		return charges
	}
	path := filepath.Join(t.TempDir(), "idem.journal")
	clock := idemtest.NewClock(epoch)
	conflicts := 0
	var store *journal.Store
	open := func() *idem.Client {
		var err error
		store, err = journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock), idem.WithHooks(idem.Hooks{
			ConfirmConflict: func(context.Context, *idem.Result, idem.Confirmation) { conflicts++ },
		}))
		require.NoError(t, err)
		st := store
		t.Cleanup(func() { _ = c.Close(); _ = st.Close() })
		return c
	}
	charge := srv.URL + "/api/v1/charge"
	c := open()
	ctx, cancel := context.WithCancel(t.Context())
	mu.Lock()
	onLost = cancel
	mu.Unlock()
	res, err := c.Submit(ctx, idem.Request{Key: "k", URL: charge, Body: []byte(`{"amount":100}`)})
	cancel()
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, "pay_1", res.ResourceID)
	require.Equal(t, 2, charged(), "charges: the resend's answer was lost")
	mu.Lock()
	marked = true
	mu.Unlock()
	_, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":5}`)})
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "not resent once the endpoint is known")
	require.True(t, op.State == idem.StateProcessing || op.State == idem.StateUnknown, "open: %s", op.State)
	require.Equal(t, "pay_1", op.Result.ResourceID)
	require.Equal(t, 3, charged(), "charges before the event: k twice, k2")

	res, err = c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pay_2",
		Source: "solidgate", EventID: "pay_2:settle_ok", Reason: "card_gate.order.updated"})
	require.ErrorIs(t, err, idem.ErrConfirmConflict, "Confirm() of the resend's payment's event")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review, "Confirm(): Result.Review")
	require.Equal(t, 1, conflicts, "conflict hook calls")
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())

	// A restart: the endpoint is known only from the journal.
	c = open()
	clock.Advance(time.Minute)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review, "Resume: flagged")
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do()")
	require.Equal(t, 3, charged(), "charges after the event")

	// pay_1's own event settles it; a person must still look: two
	// payments may be charged (ReviewMaybeTwice, which comes before the
	// contradiction: pay_2's event stays recorded beside it).
	res, err = c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "pay_1",
		Source: "solidgate", EventID: "pay_1:settle_ok", Reason: "card_gate.order.updated"})
	require.NoError(t, err, "Confirm() of pay_1's event")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Confirm(): Result.Review")
	flagged, err := c.List(t.Context(), idem.Filter{Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, 1, "List(Review)")
	require.Equal(t, 3, charged(), "charges")
}
