package idem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// An order declined under one key is paid under another with the same
// merchant reference: ErrFailed says to retry under a new key, and the
// reference names the merchant's order, not the attempt (Adyen's
// merchantReference: "your reference to uniquely identify this payment",
// reused when a shopper retries, docs.adyen.com/api-explorer/Checkout/latest/post/payments#request-merchantReference).
// A CDN whose cache key leaves the query string out (CloudFront's managed
// CachingOptimized: "Query strings included in cache key: None",
// docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/using-managed-cache-policies.html)
// serves the declined key's result, read when its answer was lost, to
// the query for the new key's payment, whose answer is lost too. The
// reference matches, as it would for any retry of the order: the decline
// was taken for the payment the server made, and the caller, told
// "failed", charges a third time. Only the key names the request in a
// cache's answer; resent with the same key, the payment's stored
// answer settles it.
func TestCachedResultOfAnEarlierKeyForTheSameReferenceIsNotOurs(t *testing.T) {
	var mu sync.Mutex
	posts := map[string]int{}
	made := map[string]string{} // the origin's stored answer per key
	var cached []byte           // the CDN's one entry for /v1/results
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			servePathKeyedCache(w, r, made, &cached, `{"status":404,"errorCode":"000","message":"No such payment","errorType":"validation"}`)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		posts[key]++
		if _, ok := made[key]; !ok {
			var req struct {
				Reference string `json:"merchantReference"`
			}
			_ = json.Unmarshal(body, &req)
			// The first key's card is declined, the second's charged.
			id, status := "pay_1", "failed"
			if len(made) > 0 {
				id, status = "pay_2", "succeeded"
			}
			made[key] = `{"id":"` + id + `","status":"` + status + `","amount":100,"merchantReference":"` + req.Reference + `"}`
		}
		if posts[key] == 1 {
			// The load balancer's 502 after the origin answered.
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `<html><head><title>502 Bad Gateway</title></head></html>`)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		_, _ = io.WriteString(w, made[key])
	}))
	t.Cleanup(srv.Close)

	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithResultEndpoint(srv.URL+"/v1/results?key={key}"))
	order := []byte(`{"amount":100,"merchantReference":"ORD-1042-7F3A9C"}`)
	res, err := c.Submit(t.Context(), idem.Request{Key: "pay-ORD-1042-a", URL: srv.URL + "/v1/payments", Body: order})
	require.ErrorIs(t, err, idem.ErrFailed, "the first card declined, read from the result endpoint")
	require.Equal(t, "pay_1", res.ResourceID)

	res, err = c.Submit(t.Context(), idem.Request{Key: "pay-ORD-1042-b", URL: srv.URL + "/v1/payments", Body: order})
	require.NotErrorIs(t, err, idem.ErrFailed, "the first key's decline taken for the second key's payment")
	require.NoError(t, err, "the resend with the same key settles it")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, "pay_2", res.ResourceID)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"pay-ORD-1042-a": 1, "pay-ORD-1042-b": 2}, posts, "each key's lost answer, then one resend of the second")
}

// servePathKeyedCache answers a result query (GET ?key=) as a CDN whose
// cache key leaves the query string out: with its one entry (cached),
// once any key's result was read through it, whatever key is asked.
// made is the origin's stored answer per key, notFound its 404's body.
func servePathKeyedCache(w http.ResponseWriter, r *http.Request, made map[string]string, cached *[]byte, notFound string) {
	if *cached != nil {
		w.Header().Set("X-Cache", "Hit from cloudfront")
		w.Header().Set("Age", "3")
		_, _ = w.Write(*cached)
		return
	}
	stored, ok := made[r.URL.Query().Get("key")]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, notFound)
		return
	}
	*cached = []byte(stored)
	w.Header().Set("X-Cache", "Miss from cloudfront")
	_, _ = io.WriteString(w, stored)
}
