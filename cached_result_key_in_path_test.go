package idem_test

import (
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

// pathResultAPI takes an order and then loses every answer to a gateway
// (502 after the origin committed), and reports results by key in the
// path (GET /v1/operations/{key}, the shape WithResultEndpoint's doc
// shows) as a plain resource that does not repeat the key, through a
// micro-cache that labels what it serves from its store. Every cache
// keys on the path, so what it serves for that path is the key's own
// result, if a few seconds old.
type pathResultAPI struct {
	*httptest.Server
	mu      sync.Mutex
	orders  map[string]int // key → orders made
	posts   int
	queries []string // paths of the result queries
}

func newPathResultAPI(t testing.TB, label http.Header) *pathResultAPI {
	t.Helper()
	api := &pathResultAPI{orders: map[string]int{}}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		api.mu.Lock()
		defer api.mu.Unlock()
		if r.Method == http.MethodPost {
			api.posts++
			key := r.Header.Get("Idempotency-Key")
			if api.orders[key] == 0 {
				api.orders[key] = 1
			}
			albBadGateway(w)
			return
		}
		api.queries = append(api.queries, r.URL.Path)
		key, ok := strings.CutPrefix(r.URL.Path, "/v1/operations/")
		if !ok || api.orders[key] == 0 {
			resultNotFound(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		addHeader(w, label)
		_, _ = io.WriteString(w, `{"id":"ord_1","status":"succeeded"}`)
	}))
	t.Cleanup(api.Close)
	return api
}

// A cached answer to a result query whose path holds the key is about
// that key, whatever its body names: a cache keys on the path, and only
// a key in the query string can be left out of a cache's key. Taken for
// "maybe another key's", it settled nothing, and an operation whose
// submits only ever meet a broken gateway stayed unknown although the
// server reported its order. Default settings but the clock.
func TestCachedResultForTheKeysPathSettles(t *testing.T) {
	forEachCacheHit(t, []cacheHit{
		{"Age", http.Header{"Age": {"3"}}},
		{"X-Cache-Status", http.Header{"X-Cache-Status": {"HIT"}}},
		{"Cache-Status", http.Header{"Cache-Status": {`nginx; hit; ttl=7`}}},
	}, func(t *testing.T, label http.Header) {
		api := newPathResultAPI(t, label)
		c := clientFor(t, api.Server, idemtest.NewClock(epoch), idem.WithResultEndpoint("/v1/operations/{key}"))
		res, err := c.Submit(t.Context(), idem.Request{Key: "k-1", URL: api.URL + "/v1/orders", Body: []byte(`{"amount":100}`)})
		require.NoError(t, err, "the result endpoint reported the order")
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "ord_1", res.ResourceID)
		api.mu.Lock()
		defer api.mu.Unlock()
		require.Equal(t, 1, api.posts, "submits: settled by the first query, not resent")
		require.Equal(t, []string{"/v1/operations/k-1"}, api.queries, "result queries")
		require.Equal(t, map[string]int{"k-1": 1}, api.orders, "orders")
	})
}

// The key in the query string still proves nothing, even when it also
// reads as a path segment: "/v1/results?key=results" with the key
// "results" is a path any key's query shares.
func TestCachedResultKeyInQueryStringAndPathStillProvesNothing(t *testing.T) {
	var mu sync.Mutex
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost {
			posts++
			page(w, http.StatusBadGateway, nil, `<html><head><title>502 Bad Gateway</title></head></html>`)
			return
		}
		// Another key's result, stored under the path alone.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Age", "40")
		_, _ = io.WriteString(w, `{"id":"ord_other","status":"succeeded"}`)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint("/v1/results?key={key}"))
	res, err := c.Submit(t.Context(), idem.Request{Key: "results", URL: srv.URL + "/v1/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotEqual(t, "ord_other", res.ResourceID, "another key's order taken for ours")
	require.NotEqual(t, idem.StateSucceeded, res.State)
}

// A cached 410 for the key's own result URL is the server's word that it
// forgot the key: flagged "key expired", never resent (a resend would be
// executed afresh). Default settings but the clock.
func TestCachedGoneForTheKeysPathFlagsKeyExpired(t *testing.T) {
	srv := newServer(t)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorAfterCommit}))
	f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
		if r.Method != http.MethodGet {
			return false
		}
		page(w, http.StatusGone, http.Header{"Content-Type": {"application/json"}, "Age": {"4"}}, `{"error":"gone"}`)
		return true
	})
	res, err := f.client(t).Submit(t.Context(), f.req("k"))
	require.ErrorIs(t, err, idem.ErrKeyExpired)
	require.Equal(t, idem.ReviewKeyExpired, res.Review)
	require.Equal(t, 1, f.posts, "never resent after the server said it forgot the key")
	require.Equal(t, 1, srv.Effects("", "k"))
}
