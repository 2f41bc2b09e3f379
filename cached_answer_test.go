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

// cachingFront is a shared cache misconfigured to store POST answers by
// URL alone (nginx's proxy_cache_methods POST, a Varnish rule), in front
// of an origin that creates one order per key and echoes no key. Every
// request to a URL after the first is answered from the cache, with the
// Age header RFC 9111 has a cache add: another request's answer.
type cachingFront struct {
	*httptest.Server
	mu      sync.Mutex
	cached  map[string][]byte
	created map[string]int // key → orders the origin created
}

func newCachingFront(t testing.TB) *cachingFront {
	t.Helper()
	f := &cachingFront{cached: map[string][]byte{}, created: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if body, ok := f.cached[r.URL.Path]; ok {
			w.Header().Set("Age", "12")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		f.created[key]++
		body := []byte(`{"id":"ord_` + key + `_` + strconv.Itoa(f.created[key]) + `","status":"created"}`)
		f.cached[r.URL.Path] = bytes.Clone(body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *cachingFront) orders(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created[key]
}

// An answer to a submit that carries Age > 0 came out of a cache, not
// from executing this request: another caller's order, never ours.
func TestCachedAnswerIsNotOurs(t *testing.T) {
	f := newCachingFront(t)
	c := clientFor(t, f.Server, idemtest.NewClock(epoch))
	first, err := c.Submit(t.Context(), idem.Request{Key: "a", URL: f.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, "ord_a_1", first.ResourceID)

	res, err := c.Submit(t.Context(), idem.Request{Key: "b", URL: f.URL + "/orders", Body: []byte(`{"amount":200}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "a cached answer settled the operation")
	require.NotEqual(t, idem.StateSucceeded, res.State)
	require.Empty(t, res.ResourceID, "another request's order taken for ours")
	require.Zero(t, f.orders("b"), "the origin never saw b")
	require.Equal(t, 1, f.orders("a"))
}
