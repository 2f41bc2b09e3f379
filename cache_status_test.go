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

// labelledCache is a shared cache misconfigured to store POST answers by
// URL alone (nginx's proxy_cache_methods POST, a Varnish rule), in front
// of an origin that creates one order per key and echoes no key. Every
// request to a URL after the first is answered from the store: another
// request's answer. hit is the header the cache puts on such an answer
// (the Age RFC 9111 has a cache add; nginx's proxy_cache sends no Age,
// and operators add "add_header X-Cache-Status $upstream_cache_status";
// CDNs add their own status header: CloudFront's and Fastly's X-Cache,
// Cloudflare's CF-Cache-Status, RFC 9211's Cache-Status), miss the one on
// an answer passed through.
type labelledCache struct {
	*httptest.Server
	mu      sync.Mutex
	cached  map[string][]byte
	created map[string]int // key → orders the origin created
}

func newLabelledCache(t testing.TB, hit, miss http.Header) *labelledCache {
	t.Helper()
	f := &labelledCache{cached: map[string][]byte{}, created: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		body, ok := f.cached[r.URL.Path]
		label := hit
		if !ok {
			key := r.Header.Get("Idempotency-Key")
			f.created[key]++
			body = []byte(`{"id":"ord_` + key + `_` + strconv.Itoa(f.created[key]) + `","status":"created"}`)
			f.cached[r.URL.Path] = bytes.Clone(body)
			label = miss
		}
		for name, vals := range label {
			w.Header()[name] = vals
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *labelledCache) orders(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created[key]
}

// An answer to a submit that a cache labels as served from its store, by
// Age > 0 or by its status header, is another request's: never ours.
func TestCacheStatusHitIsNotOurs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hit, miss http.Header
	}{
		{"RFC 9111 Age", http.Header{"Age": {"12"}}, nil},
		{"nginx X-Cache-Status", http.Header{"X-Cache-Status": {"HIT"}}, http.Header{"X-Cache-Status": {"MISS"}}},
		{"nginx X-Cache-Status stale", http.Header{"X-Cache-Status": {"STALE"}}, http.Header{"X-Cache-Status": {"EXPIRED"}}},
		{"nginx X-Cache-Status updating", http.Header{"X-Cache-Status": {"UPDATING"}}, http.Header{"X-Cache-Status": {"BYPASS"}}},
		{"CloudFront X-Cache", http.Header{"X-Cache": {"Hit from cloudfront"}}, http.Header{"X-Cache": {"Miss from cloudfront"}}},
		{"CloudFront X-Cache refresh", http.Header{"X-Cache": {"RefreshHit from cloudfront"}}, http.Header{"X-Cache": {"Miss from cloudfront"}}},
		{"Fastly X-Cache behind a shield", http.Header{"X-Cache": {"MISS, HIT"}}, http.Header{"X-Cache": {"MISS, MISS"}}},
		{"Squid X-Cache", http.Header{"X-Cache": {"HIT from proxy.example.net"}}, http.Header{"X-Cache": {"MISS from proxy.example.net"}}},
		{"Akamai X-Cache", http.Header{"X-Cache": {"TCP_MEM_HIT from a23-45-67-89.deploy.akamaitechnologies.com (AkamaiGHost/22.1.0)"}},
			http.Header{"X-Cache": {"TCP_MISS from a23-45-67-89.deploy.akamaitechnologies.com (AkamaiGHost/22.1.0)"}}},
		{"Cloudflare CF-Cache-Status", http.Header{"Cf-Cache-Status": {"HIT"}}, http.Header{"Cf-Cache-Status": {"DYNAMIC"}}},
		{"X-Proxy-Cache", http.Header{"X-Proxy-Cache": {"HIT"}}, http.Header{"X-Proxy-Cache": {"MISS"}}},
		{"RFC 9211 Cache-Status", http.Header{"Cache-Status": {`"Example Cache"; hit; ttl=376`}},
			http.Header{"Cache-Status": {`"Example Cache"; fwd=uri-miss; stored`}}},
		{"RFC 9211 Cache-Status, hit in the second cache", http.Header{"Cache-Status": {`OriginCache; fwd=uri-miss, "CDN, Inc."; hit=?1; ttl=545`}},
			http.Header{"Cache-Status": {`OriginCache; fwd=uri-miss, "CDN, Inc."; fwd=miss; key="hit"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLabelledCache(t, tc.hit, tc.miss)
			c := clientFor(t, f.Server, idemtest.NewClock(epoch))
			first, err := c.Submit(t.Context(), idem.Request{Key: "a", URL: f.URL + "/orders", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err, "an answer the cache passed through (%v) is the origin's", tc.miss)
			require.Equal(t, "ord_a_1", first.ResourceID)

			res, err := c.Submit(t.Context(), idem.Request{Key: "b", URL: f.URL + "/orders", Body: []byte(`{"amount":200}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "a cached answer settled the operation")
			require.NotEqual(t, idem.StateSucceeded, res.State)
			require.Empty(t, res.ResourceID, "another request's order taken for ours")
			require.Zero(t, f.orders("b"), "the origin never saw b")
			require.Equal(t, 1, f.orders("a"))
		})
	}
}

// A cache that stores POST answers of any status by URL (nginx's
// proxy_cache_methods POST with proxy_cache_valid any) serves another
// request's stored answer, replay marker and all. Its markers are not
// the server's word about our key: after an attempt of ours may have
// executed, a stored refusal must not settle the operation failed (the
// caller, told "failed", makes the order again), nor a 409 naming the
// resource another key created settle ours with it.
func TestCachedReplayIsNotTheServersWord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string
	}{
		{"replayed decline", http.StatusPaymentRequired, http.Header{"Idempotent-Replayed": {"true"}}, `{"error":"card declined"}`},
		{"409 naming another key's resource", http.StatusConflict, nil,
			`{"error":{"code":409,"type":"invalid_state","errors":[{"reason":"idempotent_creation_conflict","message":"A resource has already been created with this idempotency key","links":{"conflicting_resource_id":"PM_someone_elses"}}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			h := http.Header{"Content-Type": {"application/json"}, "X-Cache-Status": {"HIT"}}
			for name, vals := range tc.header {
				h[name] = vals
			}
			f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
				switch {
				case r.Method == http.MethodGet && n == 1:
					page(w, http.StatusGatewayTimeout, nil, `<html><title>504 Gateway Time-out</title></html>`)
				case r.Method == http.MethodGet:
					return false
				case n == 1:
					forward() // the origin creates the order; its answer is lost
					page(w, http.StatusBadGateway, nil, `<html><title>502 Bad Gateway</title></html>`)
				default:
					page(w, tc.status, h, tc.body)
				}
				return true
			})
			res, err := f.client(t).Submit(t.Context(), f.req("k"))
			require.NotErrorIs(t, err, idem.ErrFailed, "a cached refusal of another request failed an order the server made")
			require.NotEqual(t, "PM_someone_elses", res.ResourceID, "another key's resource taken for ours")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, "ord_000001", res.ResourceID)
			require.Equal(t, 1, srv.Effects("", "k"))
			require.Equal(t, 2, f.posts)
			require.Equal(t, 2, f.gets)
		})
	}
}
