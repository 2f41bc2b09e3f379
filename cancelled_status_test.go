package idem_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
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
}

type submitSeen struct {
	key  string
	body []byte
}

func newCancelledCharge(t testing.TB) (*cancelledCharge, *httptest.Server) {
	t.Helper()
	s := &cancelledCharge{charges: map[string]string{}}
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
		if !done {
			w.WriteHeader(499)
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
	s, srv := newCancelledCharge(t)
	c := clientFor(t, srv, idemtest.NewClock(epoch))
	body := []byte(`{"amount":100}`)

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/charges", Body: body})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "ch_1", res.ResourceID)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.charges, 1, "charges")
	require.Len(t, s.posts, 2, "submits")
	for i, p := range s.posts {
		require.Equalf(t, "k", p.key, "submit %d key", i+1)
		require.Truef(t, bytes.Equal(body, p.body), "submit %d body = %s", i+1, p.body)
	}
}
