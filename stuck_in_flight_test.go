package idem_test

import (
	"cmp"
	"context"
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

// stuckServer executes the first submit, its answer lost to a gateway's
// 502, and answers every later submit with the key that its request is
// still in progress, forever: Stripe's 409 idempotency_error
// (https://docs.stripe.com/api/idempotent_requests) for a request whose
// execution never ends. Its result endpoint, GET /operations/{key},
// answers query (404 when empty: no result endpoint at all), which
// setQuery changes. The submits numbered in refuse are answered with the
// key reused instead (keyReusedBody).
type stuckServer struct {
	srv   *httptest.Server
	clock *idemtest.Clock

	refuse map[int]bool
	window time.Duration // the client's key window; zero: the default

	mu      sync.Mutex
	query   string
	orders  int
	sends   []time.Time // the clock at each submit
	keys    []string
	bodies  []string
	queries int
}

const stuckBody = `{"error":{"message":"There is currently another in-progress request using this Idempotent Key (that probably ` +
	`means you submitted twice, and the other request is still going through): req_9xQ2JrP0aT. Please try again later.",` +
	`"type":"idempotency_error"}}`

// keyReusedBody is PayFacto's 409 for a key it holds
// (https://cd.support.payfacto.com/portal/en/kb/articles/idempotency-support):
// after a send of ours that may have executed, a refusal that counts
// toward the three that leave the operation for a person.
const keyReusedBody = `{"error":{"code":"IDEMPOTENCY_KEY_REUSED","type":"IDEMPOTENCY_ERROR",` +
	`"details":["Idempotency-Key exists and the request does not match"],"message":"Idempotency Key Reused"}}`

func newStuckServer(t testing.TB, clock *idemtest.Clock, query string) *stuckServer {
	t.Helper()
	s := &stuckServer{clock: clock, query: query}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		// Its Date on its own clock, as a real server's (RFC 9110
		// 6.6.1), not net/http's, the wall clock's, days from the test's.
		w.Header().Set("Date", clock.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/operations/") {
			s.queries++
			if s.query == "" {
				resultNotFound(w)
				return
			}
			_, _ = io.WriteString(w, s.query)
			return
		}
		if r.Method != http.MethodPost {
			// A reopened client's probe of the server's clock (HEAD):
			// no submit.
			w.WriteHeader(http.StatusNotFound)
			return
		}
		s.sends = append(s.sends, clock.Now())
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.bodies = append(s.bodies, string(body))
		switch n := len(s.sends); {
		case n == 1:
			s.orders++
			w.WriteHeader(http.StatusBadGateway)
		case s.refuse[n]:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, keyReusedBody)
		default:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, stuckBody)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *stuckServer) setQuery(query string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.query = query
}

func (s *stuckServer) submits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sends)
}

// requireOneOrder asserts one order and the same key and bytes on every
// submit, none after the key window from the first.
func (s *stuckServer) requireOneOrder(t testing.TB, key, body string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 1, s.orders, "orders")
	for i := range s.sends {
		require.Equalf(t, key, s.keys[i], "submit %d: key", i+1)
		require.Equalf(t, body, s.bodies[i], "submit %d: body", i+1)
		require.Lessf(t, s.sends[i].Sub(s.sends[0]), cmp.Or(s.window, idem.DefaultKeyRetention), "submit %d sent past the key window", i+1)
	}
}

const stuckKey, stuckRequest = "k", `{"amount":100}`

// A key whose request the server says is in progress forever, after a
// send that may have executed, with no result endpoint to ask (Stripe
// has none): each call and each Resume pass sends at most its budget of
// attempts and returns the operation open, never failed; once the key
// window has passed it is flagged ReviewKeyExpired and nothing is sent
// again. DESIGN.md: the budget ends the call with ErrUnknownOutcome, the
// operation journaled; past the key window the client never resends.
// Default settings but the clock.
func TestStuckInFlightKeyResume(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	s := newStuckServer(t, clock, "")
	c := clientFor(t, s.srv, clock)

	res, err := c.Submit(t.Context(), idem.Request{Key: stuckKey, URL: s.srv.URL + "/v1/payments", Body: []byte(stuckRequest)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateProcessing, res.State, "ours, in flight: open")
	require.Equal(t, idem.DefaultMaxAttempts, s.submits(), "submits of the call")
	require.LessOrEqual(t, clock.Now().Sub(epoch), idem.DefaultMaxElapsed, "the call's time")

	var flaggedAt int // submits when the key window passed
	for pass := 1; clock.Now().Sub(epoch) < 2*time.Hour; pass++ {
		clock.Advance(5 * time.Minute)
		before := s.submits()
		_, err := c.Resume(t.Context())
		require.NoError(t, err)
		require.LessOrEqualf(t, s.submits()-before, idem.DefaultMaxAttempts, "pass %d: submits", pass)
		op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
		require.NoError(t, err)
		require.Containsf(t, []idem.State{idem.StateProcessing, idem.StateUnknown}, op.State, "pass %d: open, never settled", pass)
		switch {
		case op.Review == idem.ReviewKeyExpired && flaggedAt == 0:
			flaggedAt = s.submits()
		case flaggedAt != 0:
			require.Equalf(t, idem.ReviewKeyExpired, op.Review, "pass %d", pass)
			require.Equalf(t, flaggedAt, s.submits(), "pass %d: submits after the key window", pass)
		default:
			require.Emptyf(t, op.Review, "pass %d: flagged before the key window", pass)
		}
	}
	require.NotZero(t, flaggedAt, "never flagged ReviewKeyExpired")
	s.requireOneOrder(t, stuckKey, stuckRequest)
}

// The same stuck key left to Run: the reconciler's passes send within the
// key window only, then flag the operation and keep sending nothing.
func TestStuckInFlightKeyRun(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	s := newStuckServer(t, clock, "")
	c := clientFor(t, s.srv, clock)
	_, err := c.Submit(t.Context(), idem.Request{Key: stuckKey, URL: s.srv.URL + "/v1/payments", Body: []byte(stuckRequest)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	ctx, cancel := context.WithCancel(t.Context())
	ran := runAsync(ctx, c)
	flagged := func() bool { // polled off the test's goroutine: no require
		op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
		return err == nil && op.Review == idem.ReviewKeyExpired
	}
	require.Eventually(t, flagged, 20*time.Second, 5*time.Millisecond, "flagged ReviewKeyExpired")
	// Run's passes go on (its clock's sleeps advance it); hours of them
	// send nothing more.
	sent := s.submits()
	require.Eventually(t, func() bool { return clock.Now().Sub(epoch) > 6*time.Hour }, 20*time.Second, 5*time.Millisecond, "Run's clock")
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.Equal(t, sent, s.submits(), "submits after the key window")
	require.True(t, flagged())
	s.requireOneOrder(t, stuckKey, stuckRequest)
}

// With a result endpoint that says the order is processing, the stuck key
// is asked about, not resent: one submit, the call's and each pass's
// queries bounded by the budget, the operation processing, never failed.
// DESIGN.md: "409 | same key in flight on the server | processing: wait,
// query"; a query's processing: wait.
func TestStuckInFlightKeyWithResultEndpoint(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	s := newStuckServer(t, clock, `{"state":"processing","resourceId":"ord_1"}`)
	c := clientFor(t, s.srv, clock, idem.WithResultEndpoint(s.srv.URL+"/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: stuckKey, URL: s.srv.URL + "/v1/payments", Body: []byte(stuckRequest)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateProcessing, res.State)
	for pass := 1; pass <= 12; pass++ {
		clock.Advance(10 * time.Minute)
		s.mu.Lock()
		before := s.queries
		s.mu.Unlock()
		_, err := c.Resume(t.Context())
		require.NoError(t, err)
		s.mu.Lock()
		asked := s.queries - before
		s.mu.Unlock()
		require.LessOrEqualf(t, asked, idem.DefaultMaxAttempts, "pass %d: queries", pass)
		op, err := c.Lookup(t.Context(), idem.DefaultScope, stuckKey)
		require.NoError(t, err)
		require.Equalf(t, idem.StateProcessing, op.State, "pass %d", pass)
	}
	require.Equal(t, 1, s.submits(), "submits: the result endpoint says it is processing")
	s.requireOneOrder(t, stuckKey, stuckRequest)
}
