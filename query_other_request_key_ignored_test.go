package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A payment to a Solidgate endpoint that does not de-duplicate by the key
// (https://api-docs.solidgate.com/api/v2/idempotent-requests: "A value of
// ignored means the endpoint does not") is sent twice, pay_1's answer
// lost and pay_2's a 500 marked ignored: flagged ReviewKeyIgnored, never
// resent. The order's status endpoint (by the merchant's order_id,
// modelled as in answerFrom) then names a payment of another amount: an
// earlier request of the merchant's under the same order_id. That query
// (query_other_request) replaced ReviewKeyIgnored with ReviewKeyInUse.
// Both block resends, but a restarted process learns that the endpoint
// ignores the key only from the open operations flagged ReviewKeyIgnored:
// with this one the only such, the next payment there whose answer was
// lost was resent, a second charge (k2, k2); and the event that settled
// the first cleared nothing of its two sends (ReviewKeyInUse, not
// ReviewMaybeTwice). The record keeps ReviewKeyIgnored; the query's
// finding stays in its attempt.
func TestQueryOtherRequestKeepsKeyIgnored(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 2 {
			ignoredInternalError(w) // pay_2 charged
			return
		}
		dropConnection(w) // pay_1 (k), pay_3 (k2) charged, their answers lost
	})
	path := filepath.Join(t.TempDir(), "idem.journal")
	clock := idemtest.NewClock(epoch)
	open := func() (*idem.Client, *journal.Store) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		// A process of its own: its own connections, none reused from
		// before the restart.
		tr := s.srv.Client().Transport.(*http.Transport).Clone()
		t.Cleanup(tr.CloseIdleConnections)
		c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: tr}), idem.WithClock(clock))
		require.NoError(t, err)
		return c, store
	}
	c, store := open()
	url := s.srv.URL + "/api/v1/charge"
	s.answerFrom(3, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"pay_0","order_id":"o-1","amount":250,"status":"settled"}`))
	})
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: url, ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	s.requireSeen(t, []string{"k", "k"}, 2)

	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	res, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do(): the status endpoint names another request's payment")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review, "Do(): Review")
	s.requireSeen(t, []string{"k", "k"}, 3)
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: Review")
	require.Equal(t, idem.StateUnknown, op.State, "journal: State")
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())

	// A restart: the endpoint is known only from the journal. Another
	// payment there loses its answer.
	c, store = open()
	t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), idem.DefaultAttemptTimeout)
	defer cancel()
	res, err = c.Submit(ctx, idem.Request{Key: "k2", URL: url, Body: []byte(`{"amount":5,"order_id":"o-2"}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2): not resent to an endpoint that ignores the key")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	s.requireSeen(t, []string{"k", "k", "k2"}, 3)

	// pay_2's event settles the first: two sends, two charges possible.
	res, err = c.Confirm(t.Context(), "", "k", cardOrderUpdated(idem.StateSucceeded, "pay_2", "evt_pay_2_settle_ok"))
	require.NoError(t, err, "Confirm()")
	require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Confirm(): Review")
	// The event found the operation by the key, which the other
	// request's events carry too: its success may be that payment's, and
	// nil would ship an order perhaps unpaid.
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	res, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Do(): the settlement may be the other request's")
	require.Equal(t, idem.ReviewMaybeTwice, res.Review, "Do(): Review")
	s.requireSeen(t, []string{"k", "k", "k2"}, 3)
}

// The same endpoint, one send: pay_1's answer a 500 marked ignored
// (flagged ReviewKeyIgnored), and the status endpoint then names a
// payment of another amount under the order_id, another request's. An
// event carrying the key settles the operation: it may be that request's
// (the event finds the operation by the key, which that request's events
// carry too, ReviewKeyInUse). With ReviewKeyIgnored kept against the
// query's finding, the confirmation after one send cleared it: the other
// request's success settled ours clean (Do nil: an order shipped perhaps
// unpaid), its decline a clean failure (Do ErrFailed: the checkout
// charges again under a new key, while pay_1 may have charged). The
// settlement reads ReviewKeyInUse, as it did when the query's finding
// replaced the flag.
func TestQueryOtherRequestKeyIgnoredOneSendConfirmKeepsKeyInUse(t *testing.T) {
	for _, tt := range []struct {
		name string
		conf idem.Confirmation
	}{
		{"the other payment succeeded", cardOrderUpdated(idem.StateSucceeded, "pay_0", "evt_pay_0_settle_ok")},
		{"the other payment declined", cardOrderUpdated(idem.StateFailed, "pay_0", "evt_pay_0_declined")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, func(_ int, w http.ResponseWriter) {
				ignoredInternalError(w) // pay_1: charged or not, nobody knows
			})
			c := clientFor(t, s.srv, idemtest.NewClock(epoch))
			s.answerFrom(2, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"pay_0","order_id":"o-1","amount":250,"status":"settled"}`))
			})
			req := idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
				Body: []byte(`{"amount":100,"order_id":"o-1"}`)}
			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.Equal(t, idem.ReviewKeyIgnored, res.Review)
			s.requireSeen(t, []string{"k"}, 1)

			op, err := c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			_, err = c.Do(t.Context(), op)
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Do(): the status endpoint names another request's payment")
			s.requireSeen(t, []string{"k"}, 2)

			res, err = c.Confirm(t.Context(), "", "k", tt.conf)
			require.NoError(t, err, "Confirm()")
			require.Equal(t, idem.ReviewKeyInUse, res.Review, "Confirm(): Review")
			op, err = c.Lookup(t.Context(), "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewKeyInUse, op.Review, "journal: Review")
			require.Equal(t, tt.conf.State, op.State, "journal: State")
			res, err = c.Do(t.Context(), op)
			require.ErrorIs(t, err, idem.ErrNeedsReview, "Do(): the settlement may be the other request's")
			require.NotErrorIs(t, err, idem.ErrFailed, "Do(): no clean failure to charge again under a new key")
			require.Equal(t, idem.ReviewKeyInUse, res.Review, "Do(): Review")
			s.requireSeen(t, []string{"k"}, 2)
		})
	}
}
