package idem_test

import (
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

// cutReplays is a Stripe-like charge endpoint (the key in the
// Idempotency-Key header; a repeat answered with the stored response,
// marked Idempotent-Replayed: true) whose first answer is a gateway's 502
// after the charge was made, whose next two replays are cut mid-body (a
// connection reset by a load balancer or a flaky network: the replay
// promised by Content-Length never arrives whole), and whose fourth
// answer is Stripe's 401 for an API key rolled meanwhile ("Expired API
// Key provided", docs.stripe.com/keys#rolling-keys) before the caller's
// new key is in place; the fifth replays the charge whole.
type cutReplays struct {
	mu   sync.Mutex
	keys []string
}

func (s *cutReplays) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	n := len(s.keys)
	s.mu.Unlock()
	const charge = `{"id":"ch_1","object":"charge","status":"succeeded"}`
	w.Header().Set("Content-Type", "application/json")
	switch n {
	case 1:
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
	case 2, 3:
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Content-Length", strconv.Itoa(len(charge)))
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, charge[:10])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	case 4:
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Expired API Key provided: sk_live_****1234","type":"invalid_request_error"}}`)
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		_, _ = io.WriteString(w, charge)
	}
}

// A replay cut in transit refuses nothing: the stored answer never
// arrived, and it is journaled as no replay (a resend reads it again).
// Counted among the refusals after a send that may have executed, as a
// 2xx refusal in an order API's envelope is, two cut replays made the
// first 401 after them the third refusal: flagged ReviewRefusedAfterSend
// at once, where a header key's server had always been asked again, and
// a resend replayed the charge. Header keys are judged as before: the 401
// is resent, the whole replay settles the charge, one key throughout.
func TestCutReplayIsNoRefusal(t *testing.T) {
	s := &cutReplays{}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/v1/charges",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"amount":2000,"currency":"usd"}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "ch_1", res.ResourceID)
	require.Equal(t, 5, res.Attempts)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"k", "k", "k", "k", "k"}, s.keys, "keys")
}
