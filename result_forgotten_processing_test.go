package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// asyncOrders accepts an order with 202 and processes it later (Adyen's
// and Checkout.com's 202 Accepted, a payout API's "pending"), keeping its
// idempotency keys in a store that can lose them: an in-memory store that
// restarts, or Redis evicting keys under maxmemory (allkeys-lru, the
// common cache setting). Orders survive; the key and its result by key do
// not: the result endpoint then answers 404, and a request with the key
// is a new order.
type asyncOrders struct {
	srv    *httptest.Server
	mu     sync.Mutex
	keys   map[string]string // idempotency key -> order id
	orders int
	posts  []string // each submit's key
	// lost, if set, is the result endpoint's nth answer (from 0) to a
	// query for a key it does not hold; 404 otherwise. misses counts
	// those queries. seen is told of every request.
	lost   func(n int) (status int, body string)
	misses int
	seen   chan struct{}
	// before, if set, runs as the nth submit (from 1) comes, under mu and
	// before its key is looked up; if it says so, the connection is
	// dropped once the order is made: the answer lost.
	before func(n int) (drop bool)
}

func newAsyncOrders(t testing.TB) *asyncOrders {
	t.Helper()
	s := &asyncOrders{keys: map[string]string{}, seen: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		defer func() {
			select {
			case s.seen <- struct{}{}:
			default:
			}
		}()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			id, ok := s.keys[strings.TrimPrefix(r.URL.Path, "/operations/")]
			if !ok {
				status, body := http.StatusNotFound, `{"error":"not found"}`
				if s.lost != nil {
					status, body = s.lost(s.misses)
				}
				s.misses++
				w.WriteHeader(status)
				_, _ = io.WriteString(w, body)
				return
			}
			_, _ = fmt.Fprintf(w, `{"state":"processing","resourceId":%q}`, id)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		s.posts = append(s.posts, key)
		drop := s.before != nil && s.before(len(s.posts))
		id, ok := s.keys[key]
		if !ok {
			s.orders++
			id = fmt.Sprintf("ord_%d", s.orders)
			s.keys[key] = id
		}
		if drop {
			dropConnection(w)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, `{"id":%q,"status":"pending"}`, id)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// forget drops every idempotency key, as a restart of the store does.
func (s *asyncOrders) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.keys)
}

// submit submits order "k" through c, which the server accepts with 202
// and keeps processing past the call's budget.
func (s *asyncOrders) submit(t *testing.T, c *idem.Client) {
	t.Helper()
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "still processing when the call's budget ends")
	require.Equal(t, idem.StateProcessing, res.State)
	require.Equal(t, "ord_1", res.ResourceID)
}

// resumeThrice calls Resume three times, a reconcile interval apart.
func resumeThrice(t *testing.T, c *idem.Client, clock *idemtest.Clock) {
	t.Helper()
	for range 3 {
		_, err := c.Resume(t.Context())
		require.NoError(t, err)
		clock.Advance(idem.DefaultReconcileInterval)
	}
}

// waitFor waits until ok, asked under the server's lock after each
// request it answers, holds.
func (s *asyncOrders) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for {
		s.mu.Lock()
		done := ok()
		s.mu.Unlock()
		if done {
			return
		}
		within(t, s.seen, what)
	}
}

// The server said it holds the order ("processing", 202). A later query
// answered 404: the server has lost the key (or a replica lags behind the
// one that answered). Resending cannot tell more than the query did, and
// to a server that lost the key it is a second order: the operation
// stays processing and is only queried, within the key window as past it;
// past it, it is flagged for a person as any unsettled operation is.
func TestProcessingNotResentAfterResultNotFound(t *testing.T) {
	s := newAsyncOrders(t)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, s.srv, clock, idem.WithResultEndpoint("/operations/{key}"))
	s.submit(t, c)

	s.forget()
	resumeThrice(t, c, clock)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	res, err := c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateProcessing, res.State)
	require.Empty(t, res.Review)

	// Past the key window, what no query settled is for a person.
	clock.Advance(idem.DefaultKeyRetention)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	op, err = c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewKeyExpired, op.Review)

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"k"}, s.posts, "submits")
	require.Equal(t, 1, s.orders, "orders")
}

// The server said it holds the order (a 202 "pending"), then lost the key
// (its in-memory idempotency store restarted; Redis evicted it under
// maxmemory allkeys-lru). Its result endpoint said 404 once; every later
// query got an answer that tells nothing: 401 once the read credential
// expired (RFC 9110 15.5.2), 403 for a credential without read permission
// (Stripe's restricted keys: permission_error), 400, 500 while the read
// side fails, 502 from a gateway, or a 200 the decoder cannot read. None
// of them is a reason to send the order again: the server that answered
// 404 has shown it may not hold the key, and a resend is then a second
// order. Whoever drives the operation (a caller's Do, Resume or Run after
// a restart) only queries. Default settings but the clock.
func TestProcessingNotResentWhateverTheResultEndpointSaysAfterNotFound(t *testing.T) {
	answers := []struct {
		name   string
		status int
		body   string
	}{
		{"401", http.StatusUnauthorized, `{"error":{"type":"invalid_request_error","message":"Expired API Key provided"}}`},
		{"403", http.StatusForbidden, `{"error":{"type":"permission_error"}}`},
		{"400", http.StatusBadRequest, `{"error":"bad request"}`},
		{"500", http.StatusInternalServerError, `{"error":"internal"}`},
		{"502", http.StatusBadGateway, `<html>Bad Gateway</html>`},
		{"undecodable", http.StatusOK, `{"state":"queued"}`},
	}
	for _, via := range []string{"Do", "Resume", "Run"} {
		for _, ans := range answers {
			t.Run(via+"/"+ans.name, func(t *testing.T) {
				s := newAsyncOrders(t)
				clock := idemtest.NewClock(epoch)
				open, closeAll := restarts(t, idem.WithHTTPClient(s.srv.Client()), idem.WithClock(clock),
					idem.WithResultEndpoint("/operations/{key}"))
				store, c := open()
				s.submit(t, c)
				closeAll(store, c)

				s.forget()
				s.lost = func(n int) (int, string) {
					if n == 0 {
						return http.StatusNotFound, `{"error":"not found"}`
					}
					return ans.status, ans.body
				}
				store, c = open()
				switch via {
				case "Do":
					op, err := c.Lookup(t.Context(), "", "k")
					require.NoError(t, err)
					_, err = c.Do(t.Context(), op)
					require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				case "Resume":
					_, err := c.Resume(t.Context())
					require.NoError(t, err)
				case "Run":
					// A resend follows the query that told nothing at once, in
					// the same visit: by the time a later visit queries, it
					// would have gone.
					ctx, cancel := context.WithCancel(t.Context())
					ran := runAsync(ctx, c)
					s.waitFor(t, "Run's queries of the lost key, or a resend", func() bool { return s.misses >= 3 || len(s.posts) > 1 })
					cancel()
					require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
				}
				op, err := c.Lookup(t.Context(), "", "k")
				require.NoError(t, err)
				require.Equal(t, idem.StateProcessing, op.State)
				closeAll(store, c)

				s.mu.Lock()
				defer s.mu.Unlock()
				require.GreaterOrEqual(t, s.misses, 2, "queries of the lost key")
				require.Equal(t, []string{"k"}, s.posts, "submits")
				require.Equal(t, 1, s.orders, "orders")
			})
		}
	}
}

// Without a result endpoint a resend is the only question idem can ask
// of an operation the server holds (Checkout.com answers a pending
// payment with 202 {"id": "pay_…", "status": "Pending"} and replays it
// for the Cko-Idempotency-Key; GET /payments/{id} is by the payment's id,
// not the key). A server whose idempotency store lost the key (Redis
// evicting under maxmemory) takes the resend for a new payment and names
// another: the payment is made twice, and idem recorded the second as the
// only one and went on resending. The answer naming another resource than
// the one the server said it holds now flags the operation for a person
// and ends the resends. Default settings but the clock.
func TestProcessingResentToAServerThatLostTheKeyIsFlagged(t *testing.T) {
	s := newAsyncOrders(t)
	clock := idemtest.NewClock(epoch)
	c := clientFor(t, s.srv, clock)
	s.submit(t, c)
	s.mu.Lock()
	resends := len(s.posts)
	s.mu.Unlock()

	s.forget()
	resumeThrice(t, c, clock)
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateProcessing, op.State)
	require.Equal(t, idem.ReviewMadeTwice, op.Review)
	require.NotNil(t, op.Result)
	require.Equal(t, "ord_1", op.Result.ResourceID, "the resource the server said it holds first")

	// A server that lost the key once may lose it again: not even Do
	// resends, inside the key window as it is.
	res, err := c.Do(t.Context(), op)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.Equal(t, idem.ReviewMadeTwice, res.Review)
	// The provider's webhook for the first payment settles it; the second
	// is still there, for a person.
	res, err = c.Confirm(t.Context(), "", "k", idem.Confirmation{State: idem.StateSucceeded, ResourceID: "ord_1",
		Source: "webhook", EventID: "evt_1"})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, idem.ReviewMadeTwice, res.Review, "kept until Resolve")

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.posts, resends+1, "submits: the caller's, then the one resend that made ord_2")
	for i, k := range s.posts {
		require.Equalf(t, "k", k, "submit %d's key", i+1)
	}
	require.Equal(t, 2, s.orders, "orders")
}
