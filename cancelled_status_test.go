package idem_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// cancelledCharge is a Google-style API (grpc-gateway, Connect) that
// de-duplicates charges by key: its handler commits the charge, then a
// call it makes after the commit is cancelled, and the cancellation is
// mapped to 499 CANCELLED, as google.rpc.Code maps it. A resend with the
// key answers the stored charge.
type cancelledCharge struct {
	mu      sync.Mutex
	charges map[string]string // key → charge id
	posts   []submitSeen
	// replays: a resend gets the first answer again, marked
	// Idempotent-Replayed, as a middleware that stores every answer of
	// a handler that started executing gives it.
	replays bool
	status  int // the cancelled answer's: 499, or a handler's own 408
}

type submitSeen struct {
	key  string
	body []byte
}

func newCancelledCharge(t testing.TB, status int, replays bool) (*cancelledCharge, *httptest.Server) {
	t.Helper()
	s := &cancelledCharge{charges: map[string]string{}, replays: replays, status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.posts = append(s.posts, submitSeen{key, body})
		id, done := s.charges[key]
		if !done {
			id = "ch_1"
			s.charges[key] = id
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if done && s.replays {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		if !done || s.replays {
			w.WriteHeader(s.status)
			_, _ = io.WriteString(w, `{"error":{"code":499,"message":"The operation was cancelled.","status":"CANCELLED"}}`)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"id":"`+id+`","status":"succeeded"}`)
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

// A 499 says the operation was cancelled, not that it never ran: the
// server may have committed it first. Taken as a refusal, it failed the
// operation at its first attempt, and a caller told "failed" charges
// again under a new key. It is ambiguous, as 408 and 5xx are: resent
// with the same key, and the server's stored charge settles it.
func TestCancelledAnswerIsNotAFailure(t *testing.T) {
	s, srv := newCancelledCharge(t, 499, false)
	c := clientFor(t, srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/charges", Body: chargeBody})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "ch_1", res.ResourceID)
	s.requireOneCharge(t, 2)
}

// A server that stores the cancelled answer replays it for the key: its
// final word, but one that does not say whether the charge was made, as
// a stored 5xx does not; nor does a stored 408, a handler's own timeout.
// Read as a stored refusal, it failed the operation at the resend. It is
// flagged for a person, never failed, never resent again.
func TestReplayedCancellationIsNotAFailure(t *testing.T) {
	for _, status := range []int{499, http.StatusRequestTimeout} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			s, srv := newCancelledCharge(t, status, true)
			c := clientFor(t, srv, idemtest.NewClock(epoch))
			req := idem.Request{Key: "k", URL: srv.URL + "/v1/charges", Body: chargeBody}

			res, err := c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrNeedsReview)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Contains(t, res.Review, strconv.Itoa(status))
			s.requireOneCharge(t, 2)

			// Asked again, it is not resent: the stored answer cannot change.
			_, err = c.Submit(t.Context(), req)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			s.requireOneCharge(t, 2)
		})
	}
}

var chargeBody = []byte(`{"amount":100}`)

// requireOneCharge asserts one charge made, and that posts submits
// reached the server, each with the key and the journaled bytes.
func (s *cancelledCharge) requireOneCharge(t testing.TB, posts int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.charges, 1, "charges")
	requireSubmits(t, s.posts, posts)
}

// requireSubmits asserts that n submits were seen, each with the key "k"
// and chargeBody, byte for byte.
func requireSubmits(t testing.TB, seen []submitSeen, n int) {
	t.Helper()
	require.Len(t, seen, n, "submits")
	for i, p := range seen {
		require.Equalf(t, "k", p.key, "submit %d key", i+1)
		require.Truef(t, bytes.Equal(chargeBody, p.body), "submit %d body = %s", i+1, p.body)
	}
}
