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

// An asynchronous order API answers 202 Accepted with the resource it
// created ("id") and a Location; the order is only decided later, and its
// result endpoint says how. 202 says "accepted, not completed": the
// order (declined here) must not be reported succeeded on the strength of
// its id.
func TestAcceptedResourceIsNotSucceeded(t *testing.T) {
	var mu sync.Mutex
	queries := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.URL.Path, "/operations/") {
			mu.Lock()
			queries++
			mu.Unlock()
			_, _ = io.WriteString(w, `{"state":"failed","resourceId":"ord_1","reason":"card declined"}`)
			return
		}
		w.Header().Set("Location", "/orders/ord_1")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"ord_1","status":"pending"}`)
	}))
	t.Cleanup(srv.Close)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint("/operations/{key}"))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.Equal(t, idem.StateFailed, res.State, "a 202 Accepted was taken for a completed order")
	require.ErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, "ord_1", res.ResourceID)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, queries)
}
