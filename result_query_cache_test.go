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

// A shared cache in front of the API (a corporate proxy, Squid) stores a
// result query's "processing" for the hour the origin's max-age allows,
// and serves it to every later query of that URL unless the request says
// Cache-Control: no-cache, as RFC 9111 lets a client. Before, idem's
// queries did not, so an order the server had finished stayed
// "processing" for the hour and the call ended unknown; now each query
// reaches the origin.
func TestResultQueryAsksCachesToRevalidate(t *testing.T) {
	var mu sync.Mutex
	queries, originQueries := 0, 0
	var stored []byte
	origin := func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/operations/") {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusBadGateway) // committed, answer lost
			return
		}
		originQueries++
		w.Header().Set("Cache-Control", "max-age=3600")
		body := `{"state":"processing"}`
		if originQueries > 1 {
			body = `{"state":"succeeded","resourceId":"ord_1"}`
		}
		stored = []byte(body)
		_, _ = io.WriteString(w, body)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet {
			queries++
			if stored != nil && !strings.Contains(r.Header.Get("Cache-Control"), "no-cache") {
				w.Header().Set("Age", "1")
				w.Header().Set("Cache-Control", "max-age=3600")
				_, _ = w.Write(stored)
				return
			}
		}
		origin(w, r)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint("/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	require.Equal(t, "ord_1", res.ResourceID)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, queries, originQueries, "every query reached the origin")
}
