package idem_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A journal already keeping journal.MaxKeyIgnoringEndpoints endpoints
// (paths with ids, each payment's its own: POST /orders/{id}/pay answered
// ignored) filled the Client's memory of them as it read them, to the
// same bound: an endpoint this process then learnt from an answer was
// not remembered at all. The Solidgate charge endpoint below ("A value of
// ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) answered k1
// 201 marked ignored; k2's answer was lost and k2 was resent under its
// key, which the endpoint charged again (pay_2, pay_3). What the journal
// keeps no longer counts against what a process learns: k2 is sent once
// and flagged for review.
func TestKeyIgnoringEndpointLearntWithTheJournalFull(t *testing.T) {
	s := newKeyIgnoringCharges(t, secondAnswerLost)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for i := range journal.MaxKeyIgnoringEndpoints {
		require.NoError(t, store.AddKeyIgnoring(t.Context(), fmt.Sprintf("POST https://api.example.com/orders/ord_%d/pay", i)))
	}
	c, err := idem.New(store, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	charge := s.srv.URL + "/api/v1/charge"

	res, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
	require.NoError(t, err, "Submit(k1)")
	require.Equal(t, idem.StateSucceeded, res.State)

	res, err = c.Submit(t.Context(), idem.Request{Key: "k2", URL: charge, Body: []byte(`{"amount":100}`)})
	s.requireSeen(t, []string{"k1", "k2"}, 0)
	require.ErrorIs(t, err, idem.ErrNeedsReview, "Submit(k2): its lost answer may have charged, and a resend would charge again")
	require.Equal(t, idem.ReviewKeyIgnored, res.Review)
	op, err := c.Lookup(t.Context(), "", "k2")
	require.NoError(t, err)
	require.Equal(t, 1, op.Attempts, "journal: k2's attempts")
}
