package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A key taken from a business id (the order number) is a value other
// resources carry under their own names: the order's refund names it as
// its order_id (Stripe's metadata, docs.stripe.com/metadata, is where a
// merchant keeps it), its statement line as its description. A CDN whose
// cache key leaves the query string out (CloudFront's managed
// CachingOptimized: "Query strings included in cache key: None",
// docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/using-managed-cache-policies.html)
// serves the refund's result to the query for the order's payment: a
// cache's answer was trusted when the key's value appeared anywhere in
// it, and the payment, never made, was settled succeeded with the
// refund's id. Now only a key-named member or an echoed key header names
// it (TestCachedResultOfAnEarlierKeyForTheSameReferenceIsNotOurs: not the
// request's own reference either).
func TestCachedResultNamingTheKeyElsewhereIsNotOurs(t *testing.T) {
	for _, tt := range []struct {
		name   string
		refund string
	}{
		{"order_id in metadata", `{"id":"re_1","object":"refund","status":"succeeded","amount":100,` +
			`"metadata":{"order_id":"ORD-1042"}}`},
		{"description", `{"id":"re_1","object":"refund","status":"succeeded","amount":100,"description":"ORD-1042"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			posts := map[string]int{}
			made := map[string]string{"ORD-1042-refund": tt.refund}
			var cached []byte // the CDN's one entry for /v1/results
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if r.Method == http.MethodGet {
					servePathKeyedCache(w, r, made, &cached, `{"error":{"type":"invalid_request_error","message":"No such result"}}`)
					return
				}
				key := r.Header.Get("Idempotency-Key")
				posts[key]++
				if posts[key] == 1 {
					// The load balancer's 502: the payment was not made.
					w.WriteHeader(http.StatusBadGateway)
					_, _ = io.WriteString(w, `<html><head><title>502 Bad Gateway</title></head></html>`)
					return
				}
				if _, ok := made[key]; !ok {
					made[key] = `{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":100}`
				}
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, made[key])
			}))
			t.Cleanup(srv.Close)
			// The refund's result is read first (a dashboard, a webhook
			// handler), and the CDN keeps it.
			resp, err := srv.Client().Get(srv.URL + "/v1/results?key=ORD-1042-refund")
			require.NoError(t, err)
			_ = resp.Body.Close()

			c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint(srv.URL+"/v1/results?key={key}"))
			res, err := c.Submit(t.Context(), idem.Request{Key: "ORD-1042", URL: srv.URL + "/v1/payment_intents", Body: []byte(`{"amount":100}`)})
			require.NotEqual(t, "re_1", res.ResourceID, "the refund taken for the payment")
			require.NoError(t, err, "the resend with the same key settles it")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "pi_1", res.ResourceID)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 2, posts["ORD-1042"], "the 502, then one resend that made the payment")
		})
	}
}
