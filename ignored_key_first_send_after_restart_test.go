package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// net/http resends a request on a fresh connection when the reused one it
// was written on dies before any answer, if the request "is idempotent
// and either has no body or has its Request.GetBody defined", and it
// counts one whose Header "contains an "Idempotency-Key" or
// "X-Idempotency-Key" entry" as idempotent (net/http's Transport docs).
// idem turns that off for an endpoint it knows ignores the key (Solidgate:
// "A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), where every
// copy is a charge. An earlier process learnt the endpoint (k1, flagged
// ReviewKeyIgnored, still open). After a restart the first send of a new
// payment went out before anything had read that flag (only a resend
// read it, ignoringLearnt): its first copy charged (pay_3) and died with
// the connection a refund to the same host had left, and net/http's copy
// charged again (pay_4). The first send reads the journal's flags once
// per Client, as a resend does: one copy, one charge, and its lost answer
// flags it. When that read fails (the journal's open index unreadable),
// the send still goes out once, as to an endpoint that ignores the key,
// and nothing resends it while the flags are unread.
func TestIgnoredKeyFirstSendAfterRestartIsSentOnce(t *testing.T) {
	for _, tt := range []struct {
		name       string
		unreadable bool // the restarted Client's ForEachOpen fails
		wantErr    error
		wantReview string
	}{
		{"flags read", false, idem.ErrNeedsReview, idem.ReviewKeyIgnored},
		{"flags unreadable", true, idem.ErrUnknownOutcome, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			firstSendAfterRestart(t, tt.unreadable, tt.wantErr, tt.wantReview)
		})
	}
}

func firstSendAfterRestart(t *testing.T, unreadable bool, wantErr error, wantReview string) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 2:
			refunded(w)
		case 3:
			dropConnection(w) // pay_3 charged, its connection dead
		default:
			ignoredInternalError(w) // pay_1, and net/http's copy of k's: pay_4
		}
	})
	path := filepath.Join(t.TempDir(), "idem.journal")
	open := func(wrap func(*journal.Store) idem.Store) (*idem.Client, *journal.Store) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(wrap(store), idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
		return c, store
	}
	charge := s.srv.URL + "/api/v1/charge"
	// A release before the endpoints were journaled: only k1's flag tells
	// (TestKeyIgnoringEndpointKeptAfterItsRecordsSettle has the endpoint
	// journaled).
	c, store := open(func(s *journal.Store) idem.Store { return storeOnly{s} })
	res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())

	c, _ = open(func(s *journal.Store) idem.Store { // a restart: the same journal, nothing read of it yet
		if unreadable {
			return &damagedOpenIndex{Store: s}
		}
		return s
	})
	_, err = c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	res, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: charge, Body: []byte(`{"amount":100}`)})
	s.requireCharges(t, []string{"k1", "k0", "k"})
	require.ErrorIs(t, err, wantErr, "its lost answer may have charged, and a resend would charge again")
	require.Equal(t, wantReview, res.Review)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, 1, op.Attempts, "journal: attempts")
	require.Equal(t, wantReview, op.Review, "journal: Review")
	require.True(t, op.State == idem.StateUnknown || op.State == idem.StateProcessing, "journal: State %s: open", op.State)
	s.requireCharges(t, []string{"k1", "k0", "k"})
}

// damagedOpenIndex is a Store whose walk of the open operations fails (a
// Client on it never reads the journal's flagged operations), as
// the journal's does when "A damaged page of the index ends the walk with
// an error matching ErrCorrupt" (journal.Store.ForEachOpen's docs), and
// counts the walks.
type damagedOpenIndex struct {
	*journal.Store
	walks atomic.Int32
}

func (s *damagedOpenIndex) ForEachOpen(context.Context, func(*journal.Record) error) error {
	s.walks.Add(1)
	return fmt.Errorf("journal: open index page 7: %w", journal.ErrCorrupt)
}

// With the open index damaged, each Submit walked the open operations
// twice (before it journaled, and before its send), every time, up to the
// damaged page: ten walks for five payments, each as long as the backlog
// before that page. The first send's walk is tried once per Client; the
// payments still go out once each (GetBody nil while the flags are
// unread), each one charge.
func TestIgnoredKeyFirstSendsWalkOnceWhenTheWalkFails(t *testing.T) {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, n)
	})
	inner, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = inner.Close() })
	store := &damagedOpenIndex{Store: inner}
	c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	var keys []string
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		keys = append(keys, key)
		res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: s.srv.URL + "/api/v1/charge", Body: []byte(`{"amount":100}`)})
		require.NoError(t, err, "Submit(%s)", key)
		require.Equal(t, idem.StateSucceeded, res.State)
	}
	s.requireSeen(t, keys, 0)
	require.EqualValues(t, 1, store.walks.Load(), "walks of the open operations")
}
