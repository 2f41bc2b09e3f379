package idem_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// PayU India refuses a refund on a payment whose transaction another
// refund request holds 200 OK, "status": 0, error_code 120 "Transaction
// lock could not be obtained." (docs.payu.in/reference-link/error-codes-for-refund-initiation).
// To the resend of a refund taken whose answer was lost, the request
// holding the lock is that refund, ours, still running: the decoder read
// the refusal as failed and Submit returned ErrFailed, inviting the
// refund again under a new token (a second refund). It is waited for,
// as a 409 in flight is: never failed, never counted among the refusals
// that leave it for a person, every request the same bytes.
func TestTransactionLockHeldToAResendIsInFlight(t *testing.T) {
	p := payuRefunds("Transaction lock could not be obtained.", 120)
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithKeyInBody(), idem.WithDecoder(decodePayURefund))
	req := payuRefundRequest(srv.URL)

	res, err := c.Submit(t.Context(), req)
	require.NotErrorIs(t, err, idem.ErrFailed, "the refund taken read as failed")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotEqual(t, idem.StateFailed, res.State)
	require.Empty(t, res.Review)

	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, []string{req.Key}, p.keys, "refunds taken")
	require.Greater(t, len(p.requests), 1, "resent while the lock is held")
	require.Equal(t, slices.Repeat([]string{payuRefundForm}, len(p.requests)), p.requests, "refund requests")
}

// To idem's first attempt, the refusal answers its sidecar's copy, which
// holds the lock: the refund is ours, flagged for a person
// (ReviewKeyInUse), never failed nor resent.
func TestTransactionLockHeldToAFirstAttemptBehindAMesh(t *testing.T) {
	const words = "Transaction lock could not be obtained."
	requireHeldKeyFirstAttemptForAPerson(t, payuRefunds(words, 120), decodePayURefund, payuRefundRequest, words)
}
