package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// front is an intermediary (a load balancer, a reverse proxy, a CDN, a
// WAF, a captive portal) in front of idem's fake server: answer decides,
// per request, whether it answers itself (true) or passes the request on
// to the server (false, or by calling forward and then answering).
type front struct {
	*httptest.Server
	srv *idemtest.Server
	mu  sync.Mutex
	// posts and gets count what reached the front, whoever answered.
	posts, gets int
}

// frontAnswer answers r itself, or returns false to pass it on. n is the
// number of requests of r's method the front has seen, r included.
// forward passes r on and writes the server's answer to a recorder, for a
// front that answers after the server did (a 502 from a load balancer
// whose connection to the origin broke after the origin committed).
type frontAnswer func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool

func newFront(t testing.TB, srv *idemtest.Server, answer frontAnswer) *front {
	t.Helper()
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	f := &front{srv: srv}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := 0
		if r.Method == http.MethodGet {
			f.gets++
			n = f.gets
		} else {
			f.posts++
			n = f.posts
		}
		f.mu.Unlock()
		forward := func() *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			return rec
		}
		if answer == nil || !answer(w, r, n, forward) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// client is a client with the default settings, sending through the
// front, with the fake server's result endpoint reached through it too.
func (f *front) client(t testing.TB, opts ...idem.Option) *idem.Client {
	t.Helper()
	return clientFor(t, f.Server, idemtest.NewClock(epoch),
		append([]idem.Option{idem.WithResultEndpoint(f.URL + "/operations/{key}")}, opts...)...)
}

func (f *front) req(key string) idem.Request {
	return idem.Request{Key: key, URL: f.URL + "/orders", Body: []byte(`{"amount":100}`)}
}

// page writes an intermediary's own answer.
func page(w http.ResponseWriter, status int, header http.Header, body string) {
	for name, vals := range header {
		w.Header()[name] = vals
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// A 206 answers a Range request, which idem never sends (a journaled
// Range header stays off result queries, and a POST has no range): a
// cache served part of something it stored. Even whole, the body is no
// answer to this request.
func TestPartialContentProvesNothing(t *testing.T) {
	partial := func(body string) frontAnswer {
		return func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
			page(w, http.StatusPartialContent, http.Header{"Content-Type": {"application/json"},
				"Content-Range": {"bytes 0-" + strconv.Itoa(len(body)-1) + "/" + strconv.Itoa(len(body))}}, body)
			return true
		}
	}
	t.Run("submit", func(t *testing.T) {
		srv, err := idemtest.NewServer()
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		cached := partial(`{"id":"ord_cached","status":"succeeded"}`)
		f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
			return r.Method != http.MethodGet && cached(w, r, n, forward)
		})
		res, err := f.client(t).Submit(t.Context(), f.req("k"))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.Equal(t, idem.StateUnknown, res.State)
		require.Empty(t, res.ResourceID, "a cached part taken for our order")
		require.Zero(t, srv.Stats().SideEffects, "nothing reached the server")
		require.Positive(t, f.gets, "the result endpoint was asked")
	})
	t.Run("result query", func(t *testing.T) {
		srv, err := idemtest.NewServer()
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Count: 100}))
		cached := partial(`{"state":"succeeded","resourceId":"ord_cached","key":"k"}`)
		f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
			return r.Method == http.MethodGet && cached(w, r, n, forward)
		})
		res, err := f.client(t).Submit(t.Context(), f.req("k"))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.Equal(t, idem.StateUnknown, res.State)
		require.Empty(t, res.ResourceID, "a cached part taken for our order")
		require.Zero(t, srv.Stats().SideEffects, "nothing executed")
	})
}
