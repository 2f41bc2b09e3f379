package idem_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// An endpoint that ignores the key says so only in its answers (Solidgate:
// "Idempotency support varies by endpoint. Send the request with an
// Idempotency-Key header and check the Idempotency-Status value. A value
// of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests). A refund to
// another endpoint of the host leaves a connection to reuse; the first
// payment to the charge endpoint goes out on it, charges (pay_2) and the
// connection dies. net/http resends a request with an Idempotency-Key
// header on a fresh connection when the reused one dies before any answer
// ("Transport only retries a request upon encountering a network error if
// the connection has already been used successfully and if the request is
// idempotent and either has no body or has its [Request.GetBody] defined.
// HTTP requests are considered idempotent if ... their [Header] map
// contains an "Idempotency-Key" or "X-Idempotency-Key" entry", net/http's
// Transport docs): pay_3, its answer lost too. The status endpoint names
// the order's last payment (modelled), and idem settled it succeeded,
// unflagged: two charges, nobody told.
// No answer of the charge endpoint had come yet, so nothing said it
// de-duplicates: the payment goes out once, and its lost answer is idem's
// to judge, by the status endpoint, which settles the only charge.
func TestKeyIgnoredEndpointNotHeardFromSendsOnce(t *testing.T) {
	s := lostChargesAfter(t, refunded)
	store, c := openOn(t, filepath.Join(t.TempDir(), "idem.journal"), s.srv.Client().Transport, idemtest.NewClock(epoch))

	_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/api/v1/charge", ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.NoError(t, err, "Submit(): settled by the status endpoint")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_2", res.ResourceID, "the only charge")
	require.Empty(t, res.Review)
	s.requireSeen(t, []string{"k0", "k"}, 1)

	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, rec.State)
	require.Len(t, rec.Attempts, 2, "journal: the charge and the query")
	require.Equal(t, journal.AttemptSubmit, rec.Attempts[0].Kind)
	require.False(t, rec.Attempts[0].Resent, "journal: the charge went out once")
	require.False(t, journal.SentTwice(rec))
}

// The same endpoint, heard from already (a 2xx that did not say it
// ignores the key): a first send on a reused connection that dies before
// it is written is resent by net/http as before, which costs nothing and
// spares an attempt; one written is resent too, as to an endpoint that
// de-duplicates, and so is one with no body (an empty capture, which
// net/http resends without rewinding it). Modelled: an endpoint whose
// answers carry no Idempotency-Status, as those of most APIs, which
// de-duplicate by the key.
func TestHeardEndpointKeepsHTTPResend(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{{"a body", []byte(`{"amount":100}`)}, {"no body", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
				if n == 2 {
					dropConnection(w) // its copy's answer lost; the server holds the key
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = fmt.Fprintf(w, `{"id":"pay_%d","status":"settled"}`, min(n, 2))
			})
			store, c := openOn(t, filepath.Join(t.TempDir(), "idem.journal"), s.srv.Client().Transport, idemtest.NewClock(epoch))

			url := s.srv.URL + "/api/v1/charge"
			_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5}`)})
			require.NoError(t, err)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: url, Body: tc.body})
			requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_2", "")
			s.requireSeen(t, []string{"k0", "k", "k"}, 0)

			rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Len(t, rec.Attempts, 1, "journal: one attempt, two copies")
			require.True(t, rec.Attempts[0].Resent, "journal: net/http resent it")
		})
	}
}

// Only a 2xx hears an endpoint: a front answers a 401 of its own (an API
// gateway's "Unauthorized" for an expired token, modelled) without the
// endpoint's Idempotency-Status, which says nothing of whether the
// endpoint reads the key. The payment after it, on the same reused
// connection, still goes out once: its lost answer is settled by the
// status endpoint, one charge.
func TestEndpointNotHeardFromByAFrontsRefusal(t *testing.T) {
	s := lostChargesAfter(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprint(w, `{"message":"Unauthorized"}`)
	})
	_, c := openOn(t, filepath.Join(t.TempDir(), "idem.journal"), s.srv.Client().Transport, idemtest.NewClock(epoch))

	url := s.srv.URL + "/api/v1/charge"
	res, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":5,"order_id":"o-0"}`)})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	res, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: url, ResultURL: s.srv.URL + "/api/v1/orders/o-1",
		Body: []byte(`{"amount":100,"order_id":"o-1"}`)})
	require.NoError(t, err, "Submit(): settled by the status endpoint")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_2", res.ResourceID, "the only charge")
	s.requireSeen(t, []string{"k0", "k"}, 1)
}

// lostChargesAfter is the charge endpoint answering its first request with
// first, then charging each after it (pay_n) and dropping its connection,
// the answer lost; its status endpoint names the order's last payment.
func lostChargesAfter(t *testing.T, first func(http.ResponseWriter)) *keyIgnoringCharges {
	s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			first(w)
			return
		}
		dropConnection(w)
	})
	s.answerFrom(1, func(w http.ResponseWriter) {
		s.mu.Lock()
		n := len(s.keys)
		s.mu.Unlock()
		orderStatus(fmt.Sprintf("pay_%d", n), "settled")(w)
	})
	return s
}
