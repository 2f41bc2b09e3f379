package idem_test

import (
	"compress/gzip"
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

// A request that names its own Accept-Encoding (one built by
// RequestFromHTTP from a request that had it, say) turns net/http's
// transparent decompression off: a server that compresses what it is
// asked to sends gzip bytes, and every answer proves nothing. Stripe-style
// replays (no result endpoint) then never settle the order; nor do result
// queries, which carry the journaled headers too.
func TestGzipAnswerIsDecoded(t *testing.T) {
	for _, withResult := range []bool{false, true} {
		name := "replayed by resend"
		if withResult {
			name = "result endpoint"
		}
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			posts, effects := 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				if r.Method == http.MethodPost {
					posts++
					effects = 1
				}
				mu.Unlock()
				body := `{"state":"succeeded","resourceId":"ord_1"}`
				if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					_, _ = io.WriteString(w, body)
					return
				}
				w.Header().Set("Content-Encoding", "gzip")
				zw := gzip.NewWriter(w)
				_, _ = io.WriteString(zw, body)
				_ = zw.Close()
			}))
			t.Cleanup(srv.Close)
			var opts []idem.Option
			if withResult {
				opts = append(opts, idem.WithResultEndpoint("/operations/{key}"))
			}
			c := clientFor(t, srv, idemtest.NewClock(epoch), opts...)

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders",
				Header: http.Header{"Accept-Encoding": {"gzip"}}, Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, "ord_1", res.ResourceID)
			require.JSONEq(t, `{"state":"succeeded","resourceId":"ord_1"}`, string(res.Body))
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 1, posts)
			require.Equal(t, 1, effects)
		})
	}
}
