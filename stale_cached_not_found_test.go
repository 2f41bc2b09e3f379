package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// staleCache is a cache in front of an API, on its GETs, modelled on
// nginx's proxy_cache as its docs configure it
// (nginx.org/en/docs/http/ngx_http_proxy_module.html: proxy_cache_valid
// 404 1m; proxy_cache_use_stale error timeout http_500 http_502 http_503
// http_504; add_header X-Cache-Status $upstream_cache_status): an answer
// it stored is served for a minute whatever the request's Cache-Control
// (nginx reads it only through proxy_cache_bypass), and after that,
// while the origin fails (down), however old (STALE). label names what
// it served: nginx's X-Cache-Status, or the Age a cache that counts it
// sends (RFC 9111 4.2.4 and 5.1: Varnish's grace, stale-if-error). POSTs
// go to the origin.
type staleCache struct {
	*httptest.Server
	clock *idemtest.Clock
	label func(h http.Header, status string, age time.Duration)

	mu     sync.Mutex
	down   bool
	stored map[string]storedAnswer // by path
}

type storedAnswer struct {
	at     time.Time
	status int
	body   []byte
}

func newStaleCache(t *testing.T, origin *httptest.Server, clock *idemtest.Clock, label func(http.Header, string, time.Duration)) *staleCache {
	t.Helper()
	u, err := url.Parse(origin.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = origin.Client().Transport
	c := &staleCache{clock: clock, label: label, stored: map[string]storedAnswer{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			proxy.ServeHTTP(w, r)
			return
		}
		c.get(w, r, origin)
	}))
	t.Cleanup(c.Close)
	return c
}

// get answers a GET from the store, or the origin's answer, storing it.
func (c *staleCache) get(w http.ResponseWriter, r *http.Request, origin *httptest.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, ok := c.stored[r.URL.Path]
	serve := func(status string, a storedAnswer) {
		w.Header().Set("Content-Type", "application/json")
		c.label(w.Header(), status, now.Sub(a.at))
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	}
	if ok && now.Sub(s.at) < time.Minute {
		serve("HIT", s)
		return
	}
	if c.down {
		if ok {
			serve("STALE", s)
			return
		}
		serve("MISS", storedAnswer{at: now, status: http.StatusBadGateway, body: []byte(`{"message":"Bad Gateway"}`)})
		return
	}
	resp, err := origin.Client().Get(origin.URL + r.URL.RequestURI())
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := storedAnswer{at: now, status: resp.StatusCode, body: body}
	if a.status < 500 {
		c.stored[r.URL.Path] = a
	}
	serve("MISS", a)
}

// setDown says whether the origin's GETs fail.
func (c *staleCache) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

// cacheLabels are the ways a cache names what it served from its store.
var cacheLabels = []struct {
	name  string
	label func(h http.Header, status string, age time.Duration)
}{
	{"nginx X-Cache-Status", func(h http.Header, status string, _ time.Duration) { h.Set("X-Cache-Status", status) }},
	{"Age", func(h http.Header, _ string, age time.Duration) { h.Set("Age", fmt.Sprint(int(age.Seconds()))) }},
}

// requirePlaced asserts that the exchange was sent one order, ord-9's,
// and placed it.
func (x *gopaxExchange) requirePlaced(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	require.Equal(t, []string{"ord-9"}, x.orders, "orders placed")
	require.Equal(t, 1, x.posts, "orders sent: the lost one, never resent")
}

// A cache's stored "no such order" for the key's own path is the
// endpoint's answer of when it was stored, not of now. One stored while
// the read path lagged the engine and served past the result lag (stale,
// while the origin fails; or fresh, of a long lifetime) was read as the
// order not placed, and the client order id, free again once its order
// had filled, was sent again: two orders for one Submit, the call settled
// with the second. A cached answer that found nothing proves nothing:
// the operation stays unknown, nothing is resent, and the origin's own
// answer settles it once the cache passes the query on. Default settings
// but the key in the body, the decoder and the result endpoint.
func TestStaleCachedNotFoundIsNoProofTheOrderWasNotPlaced(t *testing.T) {
	for _, tc := range cacheLabels {
		t.Run(tc.name, func(t *testing.T) {
			// Every order fills; the id is free again once its order has
			// (modelled, as Binance's newClientOrderId is documented to
			// be).
			x := &gopaxExchange{status: http.StatusNotFound, placedFirst: true, lagging: true}
			origin := httptest.NewServer(http.HandlerFunc(x.serve))
			t.Cleanup(origin.Close)
			clock := idemtest.NewClock(epoch)
			front := newStaleCache(t, origin, clock, tc.label)
			c := clientFor(t, front.Server, clock, idem.WithKeyInBody(), idem.WithDecoder(decodeGopaxOrder),
				idem.WithResultEndpoint(front.URL+"/orders/clientOrderId/{key}"))

			res, err := c.Submit(t.Context(), gopaxMarketBuy(front.URL))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.StateUnknown, res.State, "not found within the result lag: asked again, not resent")

			// The read path catches up, then fails: the cache serves the
			// "no such order" it stored within the lag.
			x.mu.Lock()
			x.lagging = false
			x.mu.Unlock()
			front.setDown(true)
			clock.Advance(idem.DefaultResultLag)
			requireResumeLeavesUnknown(t, c, "ord-9")
			x.requirePlaced(t)

			front.setDown(false)
			requireResumeSettlesKey(t, c, "ord-9", "9870001")
			x.requirePlaced(t)
		})
	}
}

// After "Order already paid" to a first attempt (the server checks the
// order before the key, and a copy of ours a mesh sent first paid it
// under our key: paidOrderServer, TestOrderPaidToAFirstAttemptAsksTheResultEndpoint),
// the result endpoint's "not found" for the key, past the lag, fails the
// payment. A cache's stale one, stored while the read path lagged, failed
// it too: the caller, told the order was paid by another request, paid
// again under a new key, two charges. Now it stays unknown, flagged
// ReviewRefusedAfterSend, and the origin's answer naming the copy's
// payment settles it, one charge. Default settings.
func TestStaleCachedNotFoundDoesNotFailAnOrderPaidRefusal(t *testing.T) {
	for _, tc := range cacheLabels {
		t.Run(tc.name, func(t *testing.T) {
			s := newPaidOrderServer(t, http.StatusConflict)
			s.orderFirst = true
			s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
			s.lag = 1 << 30                                                     // the read path has not caught up
			clock := idemtest.NewClock(epoch)
			front := newStaleCache(t, s.srv, clock, tc.label)
			c := clientFor(t, front.Server, clock)
			req := idem.Request{Key: "k", URL: front.URL + "/v1/orders/o-1/payments", Body: []byte(`{"amount":100}`),
				ResultURL: front.URL + "/v1/payments/by-key/k"}

			res, err := c.Submit(t.Context(), req)
			requireOrderPaidUnknown(t, res, err)

			s.mu.Lock()
			s.lag = 0
			s.mu.Unlock()
			front.setDown(true)
			op := resumeK(t, c, clock, idem.DefaultResultLag)
			require.Equal(t, idem.StateUnknown, op.State, "a stale \"not found\" failed the payment")
			require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)

			front.setDown(false)
			op = resumeK(t, c, clock, 0)
			require.Equal(t, idem.StateSucceeded, op.State)
			require.Equal(t, "pay_1", op.Result.ResourceID)
			s.requireSent(t, 1, map[string]int{"k": 1})
		})
	}
}
