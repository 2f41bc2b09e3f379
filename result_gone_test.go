package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// expiringServer is another vendor's idempotent API: it keeps a key for
// window (by the test's clock), replays its stored answer within it, and
// executes a request afresh once it has forgotten the key. Its result
// endpoint, /operations/{key}, answers 410 Gone for a key it has expired,
// and 503 while down is set. Its first submit's answer is lost (a
// gateway's 502 after the commit), unless script says otherwise.
type expiringServer struct {
	*httptest.Server
	clock  *idemtest.Clock
	window time.Duration

	mu      sync.Mutex
	stored  map[string]time.Time // key → when it executed
	effects map[string]int
	submits int
	down    bool
	// script's: the first submit's answer (status 0: a 502), the result
	// endpoint's for a key it holds (status 0: the key's order), and
	// whether the server goes down (every answer a 503, submits execute
	// nothing) once the first submit has executed.
	first, found   shape
	downAfterFirst bool
	submitsDown    bool // down since the first submit (downAfterFirst)
}

func newExpiringServer(t testing.TB, clock *idemtest.Clock, window time.Duration) *expiringServer {
	t.Helper()
	s := &expiringServer{clock: clock, window: window, stored: map[string]time.Time{}, effects: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *expiringServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if key, ok := strings.CutPrefix(r.URL.Path, "/operations/"); ok && r.Method == http.MethodGet {
		at, known := s.stored[key]
		switch {
		case s.down || s.submitsDown:
			w.WriteHeader(http.StatusServiceUnavailable)
		case known && now.Sub(at) >= s.window:
			w.WriteHeader(http.StatusGone)
			_, _ = io.WriteString(w, `{"error":"idempotency key expired"}`)
		case known && s.found.status != 0:
			writeShape(w, s.found)
		case known:
			_, _ = fmt.Fprintf(w, `{"state":"succeeded","resourceId":"ord_%s"}`, key)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
		return
	}
	if s.submitsDown {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.submits++
	if at, ok := s.stored[key]; !ok || now.Sub(at) >= s.window {
		s.stored[key] = now
		s.effects[key]++
	}
	if s.submits == 1 {
		s.submitsDown = s.downAfterFirst
		if s.first.status != 0 {
			writeShape(w, s.first)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"state":"succeeded","resourceId":"ord_%s"}`, key)
}

// script sets the answers the server gives in place of its own (the
// fields below its down).
func (s *expiringServer) script(first, found shape, downAfterFirst bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.first, s.found, s.downAfterFirst = first, found, downAfterFirst
}

// writeShape writes the answer a.
func writeShape(w http.ResponseWriter, a shape) {
	for name, vals := range a.header {
		w.Header()[name] = vals
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// set takes the result endpoint down, or brings the whole server back.
func (s *expiringServer) set(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	s.submitsDown = s.submitsDown && down
}

func (s *expiringServer) counts(key string) (submits, effects int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submits, s.effects[key]
}

// A result endpoint that answers 410 Gone says the server has forgotten
// the key: a resend would be executed afresh. The server here keeps keys
// 10 minutes, less than the client assumes; the process comes back 15
// minutes after a lost answer, and Resume must not order again.
func TestResultGoneIsNeverResent(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv := newExpiringServer(t, clock, 10*time.Minute)
	c := clientFor(t, srv.Server, clock, idem.WithResultEndpoint("/operations/{key}"))

	srv.set(true) // the result endpoint is down: the call cannot settle
	_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	submits, effects := srv.counts("k")
	require.Equal(t, 1, submits)
	require.Equal(t, 1, effects)

	clock.Advance(15 * time.Minute)
	srv.set(false)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	submits, effects = srv.counts("k")
	require.Equal(t, 1, effects, "the order was executed twice")
	require.Equal(t, 1, submits, "resent after the server said the key is gone")
	require.Equal(t, 1, sum.Review)

	// Flagged for a person; an explicit Do does not resend it either, even
	// once the endpoint has forgotten the key altogether (404).
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyExpired, op.Review)
	require.Equal(t, idem.StateUnknown, op.State)
	srv.mu.Lock()
	delete(srv.stored, "k")
	srv.mu.Unlock()
	_, err = c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrKeyExpired)
	submits, effects = srv.counts("k")
	require.Equal(t, 1, submits, "an explicit Do resent a key the server said it forgot")
	require.Equal(t, 1, effects)
}
