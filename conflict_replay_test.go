package idem_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// conflictReplayPayouts is a payout API that answers a request under a
// key it has processed with 409 Conflict and the ORIGINAL answer's body,
// not a replay marked as such: Interchecks
// (docs-v2.interchecks.com/docs/idempotent-requests: 409 with the
// original response once the first request was processed, 102 while it
// runs) and DOKU ("DOKU system will send the same Response body with HTTP
// Status Code 409 Conflict",
// developers.doku.com/get-started-with-doku-api/idempotency-request).
// Its payout echoes the request's own reference, as payout APIs echo a
// merchant reference (Paysafe's merchantRefNum for Interchecks' instant
// withdrawals). The gateway in front loses the first answer (504) when
// lostFirst is set; answer, if set, is what a later request under the
// key gets in place of the stored body. accepted: the payout is sent
// asynchronously, answered 202 Accepted and "PENDING".
type conflictReplayPayouts struct {
	lostFirst bool
	answer    string
	accepted  bool

	mu      sync.Mutex
	stored  map[string]string
	payouts int
	keys    []string
}

func (s *conflictReplayPayouts) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		Reference string `json:"merchantRefNum"`
		Amount    string `json:"amount"`
		Card      string `json:"card"`
	}
	_ = json.Unmarshal(b, &req)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, key)
	w.Header().Set("Content-Type", "application/json")
	if stored, ok := s.stored[key]; ok {
		if s.answer != "" {
			stored = s.answer
		}
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, stored)
		return
	}
	s.payouts++
	status, code := "PAID", http.StatusCreated
	switch {
	case s.accepted:
		status, code = "PENDING", http.StatusAccepted
	case req.Card == declineCard:
		status = "DECLINED"
	}
	s.stored[key] = `{"id":"pmt_9f2c41","merchantRefNum":"` + req.Reference + `","amount":"` + req.Amount + `","currency":"USD","status":"` + status + `"}`
	if s.lostFirst && len(s.keys) == 1 {
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = io.WriteString(w, `<html><body><h1>504 Gateway Time-out</h1></body></html>`)
		return
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s.stored[key])
}

// submit sends one payout of 25.00 to card under merchantRefNum
// "payout-2026-0042" with key "k" in the Idempotency-Key header, through a
// client with the default settings.
func (s *conflictReplayPayouts) submit(t *testing.T, card string) (*idem.Client, *idem.Result, error) {
	t.Helper()
	s.stored = map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/payouts",
		Body: []byte(`{"merchantRefNum":"payout-2026-0042","amount":"25.00","currency":"USD","card":"` + card + `"}`)})
	return c, res, err
}

// requireSent asserts the payouts made and that each of n submits
// carried key "k".
func (s *conflictReplayPayouts) requireSent(t *testing.T, payouts, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, payouts, s.payouts, "payouts")
	require.Len(t, s.keys, n, "submits")
	for i, k := range s.keys {
		require.Equalf(t, "k", k, "submit %d: Idempotency-Key", i+1)
	}
}

// A 409 whose body is the key's completed payout, after an attempt of
// ours that may have executed, is the server's stored answer for our key:
// it settles the operation with that payout. Read as the key in flight, it
// was waited on and resent until the budget ran out, and then by every
// Resume and Run pass until the key window passed: never settled. The
// body proves it is about our request by our own reference in it; the
// amount is ours too.
func TestConflictCarryingTheOriginalAnswerSettles(t *testing.T) {
	t.Run("paid", func(t *testing.T) {
		s := &conflictReplayPayouts{lostFirst: true}
		_, res, err := s.submit(t, "4444333322221111")
		requireOutcome(t, res, err, idem.StateSucceeded, nil, "pmt_9f2c41", "")
		s.requireSent(t, 1, 2)
	})
	t.Run("declined", func(t *testing.T) {
		s := &conflictReplayPayouts{lostFirst: true}
		_, res, err := s.submit(t, declineCard)
		requireOutcome(t, res, err, idem.StateFailed, []error{idem.ErrFailed}, "pmt_9f2c41", "")
		s.requireSent(t, 1, 2)
	})
}

// A payout answered 202 Accepted and PENDING is held as processing, and a
// resend under its key (no result endpoint to ask) gets that same answer
// back with 409, as the server stores it: nothing more than the 202 said.
// It was read as a completed payout (the status code that said "not done"
// is not in the replay) and the operation settled succeeded while the
// payout could still be declined; it stays processing, with the payout
// held, and is never sent again as a new payout.
func TestConflictCarryingTheOriginalAcceptedAnswerStaysProcessing(t *testing.T) {
	s := &conflictReplayPayouts{accepted: true}
	c, res, err := s.submit(t, "4444333322221111")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateProcessing, res.State)
	require.Equal(t, "pmt_9f2c41", res.ResourceID)
	s.mu.Lock()
	sent := len(s.keys)
	s.mu.Unlock()
	require.Greater(t, sent, 1, "the 202 was never followed by a resend: the replay path is not exercised")
	s.requireSent(t, 1, sent)
	got, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateProcessing, got.State, "journaled")
}

// A 409 carrying a completed resource that does not show it is about our
// request (neither our key nor our reference in it), or one that describes
// another request (another amount under our key), settles nothing: the
// first is read as before, the key's request in flight (never failed,
// never settled by another request's resource); the second is another
// request's answer under our key, for a person.
func TestConflictCarryingAnotherResourceDoesNotSettle(t *testing.T) {
	t.Run("not about our request", func(t *testing.T) {
		s := &conflictReplayPayouts{lostFirst: true,
			answer: `{"id":"pmt_77aa01","merchantRefNum":"payout-2026-0007","amount":"25.00","currency":"USD","status":"PAID"}`}
		_, res, err := s.submit(t, "4444333322221111")
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrFailed)
		require.NotEqual(t, idem.StateSucceeded, res.State)
		require.NotEqual(t, idem.StateFailed, res.State)
		require.Empty(t, res.ResourceID, "another request's payout taken for ours")
		s.requireSent(t, 1, 5) // the call's budget of attempts, as for any key in flight
	})
	t.Run("another amount under our key", func(t *testing.T) {
		s := &conflictReplayPayouts{lostFirst: true,
			answer: `{"id":"pmt_9f2c41","merchantRefNum":"payout-2026-0042","amount":"250.00","currency":"USD","status":"PAID"}`}
		_, res, err := s.submit(t, "4444333322221111")
		require.ErrorIs(t, err, idem.ErrKeyConflict)
		require.ErrorIs(t, err, idem.ErrNeedsReview)
		require.NotErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.ReviewKeyInUse, res.Review)
		require.NotEqual(t, idem.StateSucceeded, res.State)
		s.requireSent(t, 1, 2)
	})
}

// The same 409 to a first attempt answers a request under our key that
// was not idem's (nothing of ours may have executed): as a replayed 2xx
// to a first attempt, it is flagged ReviewKeyInUse, never taken for ours
// and never resent.
func TestConflictCarryingTheOriginalAnswerToAFirstAttempt(t *testing.T) {
	s := &conflictReplayPayouts{stored: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.stored["k"] = `{"id":"pmt_9f2c41","merchantRefNum":"payout-2026-0042","amount":"25.00","currency":"USD","status":"PAID"}`
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/payouts",
		Body: []byte(`{"merchantRefNum":"payout-2026-0042","amount":"25.00","currency":"USD","card":"4444333322221111"}`)})
	requireForeignKey(t, res, err)
	s.requireSent(t, 0, 1)
}

// decodePaysafePayment reads an answer as a client of Paysafe's APIs may:
// the payment in the body, any status but 2xx its failure (a decline
// comes 402 with the payment's id, its status and an "error",
// developer.paysafe.com/en/api-docs/alternative-payments-api/test-and-go-live/alternate-payments-errors/).
// A Decoder is given 2xx answers only, so the non-2xx branch is for the
// caller's own use of the function.
func decodePaysafePayment(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.ID == "" {
		return idem.Outcome{}, errors.New("no payment in the body")
	}
	if a.StatusCode/100 != 2 || v.Status == "DECLINED" {
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.ID, Reason: v.Status}, nil
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.ID}, nil
}

// A Decoder reads 2xx answers (idem.Decoder): the key's stored answer in
// a 409 is not given to one, which may read any other status as the
// payment's failure. Given it, the paid payout's 409 settled the payout
// failed, and the caller, told it failed, pays again under a new key.
func TestConflictCarryingTheOriginalAnswerIsNotGivenToADecoder(t *testing.T) {
	s := &conflictReplayPayouts{lostFirst: true, stored: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithDecoder(decodePaysafePayment))
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v2/payouts",
		Body: []byte(`{"merchantRefNum":"payout-2026-0042","amount":"25.00","currency":"USD","card":"4444333322221111"}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed, "a paid payout reported failed")
	require.NotEqual(t, idem.StateFailed, res.State)
	s.requireSent(t, 1, 5) // the call's budget of attempts, as for any key in flight
}

// The same 202 Accepted and PENDING payout, its first answer lost at the
// gateway (504): nothing held says the payout was accepted unfinished,
// and the 409 that replays its body has no status code that says so
// either. Read as a 201's body would be, the payout's resource settled
// the operation succeeded while the payout could still be declined (its
// status, "PENDING", says nothing done). A replay settles by what its
// body's status says, as a 202's would; here it stays unknown, the
// payout never made twice and every resend under key "k".
func TestConflictCarryingALostAcceptedAnswerDoesNotSettle(t *testing.T) {
	s := &conflictReplayPayouts{lostFirst: true, accepted: true}
	_, res, err := s.submit(t, "4444333322221111")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateSucceeded, res.State, "a pending payout settled as paid")
	require.NotEqual(t, idem.StateFailed, res.State)
	s.requireSent(t, 1, 5) // the call's budget of attempts, as for any key in flight
}

// gatewayTimeout is a gateway's answer when the server behind it did not
// answer in time: whether the request was carried out is unknown.
var gatewayTimeout = shape{status: http.StatusGatewayTimeout, body: `<html><body><h1>504 Gateway Time-out</h1></body></html>`}

// requireKeyInFlight asserts that a call ended as one whose key's request
// may still run: unknown, neither settled nor failed, and with no
// resource taken for its own (what says why it would have been).
func requireKeyInFlight(t testing.TB, res *idem.Result, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateSucceeded, res.State)
	require.NotEqual(t, idem.StateFailed, res.State)
	require.Empty(t, res.ResourceID, what)
}
