package idem_test

import (
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
}

func newAsyncOrders(t testing.TB) *asyncOrders {
	t.Helper()
	s := &asyncOrders{keys: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			id, ok := s.keys[strings.TrimPrefix(r.URL.Path, "/operations/")]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"error":"not found"}`)
				return
			}
			_, _ = fmt.Fprintf(w, `{"state":"processing","resourceId":%q}`, id)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		s.posts = append(s.posts, key)
		id, ok := s.keys[key]
		if !ok {
			s.orders++
			id = fmt.Sprintf("ord_%d", s.orders)
			s.keys[key] = id
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
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "still processing when the call's budget ends")
	require.Equal(t, idem.StateProcessing, res.State)
	require.Equal(t, "ord_1", res.ResourceID)

	s.forget()
	for range 3 {
		_, err = c.Resume(t.Context())
		require.NoError(t, err)
		clock.Advance(idem.DefaultReconcileInterval)
	}
	op, err := c.Lookup(t.Context(), "", "k")
	require.NoError(t, err)
	res, err = c.Do(t.Context(), op)
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
