package idemotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/idemkit/idem"
)

// A result query the server refuses (an expired API key's 401, its own
// 500) is journaled with the server's words since the refusal's text
// became the attempt's error, and an attempt with an error was labelled
// error.type "transport": a server that answered, as if the network had
// failed, and a 500 no longer "500". OpenTelemetry's HTTP client spans
// give error.type as "the status code number (represented as a string)"
// when one was received and it is an error
// (opentelemetry.io/docs/specs/semconv/http/http-spans/#http-client).
// Stripe's answers: docs.stripe.com/error-codes#api-key-expired
// ({"error":{"type":"authentication_error",…}}) and
// docs.stripe.com/error-handling ("api_error" for a 500). The create's
// answers are lost (a gateway's 502).
func TestRefusedQuerySpanErrorTypeIsItsStatus(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
	}{
		{http.StatusUnauthorized, `{"error":{"type":"authentication_error","message":"Expired API Key provided: rk_live_***q"}}`},
		{http.StatusInternalServerError, `{"error":{"type":"api_error","message":"An unknown error occurred"}}`},
	} {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			var mu sync.Mutex
			gets := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if r.Method == http.MethodGet {
					mu.Lock()
					gets++
					mu.Unlock()
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.body)
					return
				}
				w.WriteHeader(http.StatusBadGateway)
			}))
			t.Cleanup(srv.Close)
			f := newFakeAPI(t)
			c, err := idem.New(f.store, idem.WithHTTPClient(srv.Client()), idem.WithClock(f.clk),
				idem.WithResultEndpoint("/v1/orders/{key}"), idem.WithHooks(f.tel.inst.Hooks()))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })

			_, err = c.Submit(context.Background(), idem.Request{Key: "k", URL: srv.URL + "/v1/orders", Body: []byte(`{"amount":100}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			queries := 0
			for _, s := range f.tel.spans.Ended() {
				kind, errType := "", ""
				for _, kv := range s.Attributes() {
					switch kv.Key {
					case "idem.attempt.kind":
						kind = kv.Value.AsString()
					case "error.type":
						errType = kv.Value.AsString()
					}
				}
				if kind != "query" {
					continue
				}
				queries++
				require.Equal(t, strconv.Itoa(tt.status), errType, "span %s", s.Name())
				require.Equal(t, codes.Error, s.Status().Code, "span %s", s.Name())
			}
			mu.Lock()
			defer mu.Unlock()
			require.Positive(t, queries)
			require.Equal(t, gets, queries, "a span for every query")
		})
	}
}
