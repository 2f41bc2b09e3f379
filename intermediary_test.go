package idem_test

import (
	"context"
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
	addHeader(w, header)
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// addHeader adds header's values to w's.
func addHeader(w http.ResponseWriter, header http.Header) {
	for name, vals := range header {
		w.Header()[name] = vals
	}
}

// albBadGateway is an AWS load balancer's 502 page, as it answers a
// request whose origin's answer it lost or that no healthy target took.
func albBadGateway(w http.ResponseWriter) {
	page(w, http.StatusBadGateway, http.Header{"Server": {"awselb/2.0"}}, `<html><head><title>502 Bad Gateway</title></head></html>`)
}

// resultNotFound is a result endpoint's 404 for a key it has no order of.
func resultNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"error":"not found"}`)
}

// cacheHit is a cache's label on an answer it served from its store.
type cacheHit struct {
	name  string
	label http.Header
}

// forEachCacheHit runs f with each hit's label, a subtest a hit.
func forEachCacheHit(t *testing.T, hits []cacheHit, f func(t *testing.T, label http.Header)) {
	for _, h := range hits {
		t.Run(h.name, func(t *testing.T) { f(t, h.label) })
	}
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
		srv := newServer(t)
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
		srv := newServer(t)
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

// queryCachingAPI is an API whose result endpoint takes the key in the
// query string (GET /v1/results?key=…) and answers the resource the key
// created, without naming the key (as a plain resource does), behind a
// CDN that caches GETs by path alone (CloudFront's cache policies leave
// the query string out of the key unless told, Cloudflare's "ignore
// query string"). Its first POST is answered 502 by the front before the
// origin saw it, as a load balancer with no healthy target does.
type queryCachingAPI struct {
	*httptest.Server
	mu      sync.Mutex
	created map[string]string // key → order
	cached  map[string][]byte // path → stored answer
	posts   int
}

func newQueryCachingAPI(t testing.TB, label http.Header) *queryCachingAPI {
	t.Helper()
	api := &queryCachingAPI{created: map[string]string{}, cached: map[string][]byte{}}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		api.mu.Lock()
		defer api.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			api.posts++
			if api.posts == 1 {
				albBadGateway(w)
				return
			}
			key := r.Header.Get("Idempotency-Key")
			if api.created[key] == "" {
				api.created[key] = "ord_" + key
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"`+api.created[key]+`","status":"succeeded"}`)
			return
		}
		if body, ok := api.cached[r.URL.Path]; ok {
			addHeader(w, label)
			_, _ = w.Write(body)
			return
		}
		id := api.created[r.URL.Query().Get("key")]
		if id == "" {
			resultNotFound(w)
			return
		}
		body := []byte(`{"id":"` + id + `","status":"succeeded"}`)
		api.cached[r.URL.Path] = body
		_, _ = w.Write(body)
	}))
	t.Cleanup(api.Close)
	return api
}

// A result query's answer that came out of a cache is about the cache's
// key, not necessarily ours: one that does not name our key proves
// nothing, or another operation's order is taken for ours and ours is
// never made.
func TestCachedResultOfAnotherKeyIsNotOurs(t *testing.T) {
	forEachCacheHit(t, []cacheHit{
		{"Age", http.Header{"Age": {"40"}}},
		{"X-Cache", http.Header{"X-Cache": {"Hit from cloudfront"}}},
	}, func(t *testing.T, label http.Header) {
		api := newQueryCachingAPI(t, label)
		api.created["other"] = "ord_other" // another operation, settled
		// Someone reads its result: the CDN stores the answer under
		// /v1/results, whatever the key.
		resp, err := api.Client().Get(api.URL + "/v1/results?key=other")
		require.NoError(t, err)
		_ = resp.Body.Close()

		c := clientFor(t, api.Server, idemtest.NewClock(epoch), idem.WithResultEndpoint(api.URL+"/v1/results?key={key}"))
		res, err := c.Submit(t.Context(), idem.Request{Key: "mine", URL: api.URL + "/v1/orders", Body: []byte(`{"amount":100}`)})
		require.NotEqual(t, "ord_other", res.ResourceID, "another operation's order taken for ours")
		require.NoError(t, err, "the resend with the same key settles it")
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "ord_mine", res.ResourceID)
		require.Equal(t, 2, api.posts, "one 502 from the front, one resend that executed")
	})
}

// A cached answer to a result query that names our key is ours, if
// stale: it settles as the server's own would.
func TestCachedResultNamingOurKeySettles(t *testing.T) {
	srv := newServer(t)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorAfterCommit}))
	f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
		if r.Method != http.MethodGet {
			return false
		}
		rec := forward()
		h := rec.Header().Clone()
		h.Set("Age", "30")
		h.Set("X-Cache", "HIT")
		page(w, rec.Code, h, rec.Body.String())
		return true
	})
	res, err := f.client(t).Submit(t.Context(), f.req("k"))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, f.posts, "settled by the query, never resent")
	require.Equal(t, 1, f.gets)
	require.Equal(t, 1, srv.Effects("", "k"))
}

// A redirect to a login page or to another host, from an SSO proxy or a
// captive portal in front of the API, on submits and result queries
// alike: idem follows none. Nothing is settled (a handler may redirect
// after its work, as Rails' redirect_to after a create does), nothing is
// failed, every submit carries the key, and each attempt's journaled
// error says where the redirect points and what to do, without the
// redirect's query string (a login redirect may carry a token).
func TestRedirectToLoginIsExplained(t *testing.T) {
	srv := newServer(t)
	f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
		if r.Header.Get("Idempotency-Key") != "k" && r.Method != http.MethodGet {
			page(w, http.StatusBadRequest, nil, "no key")
			return true
		}
		page(w, http.StatusFound, http.Header{"Location": {"https://sso.example.com/login?next=%2Forders&SAMLRequest=c2VjcmV0"}}, "")
		return true
	})
	var mu sync.Mutex
	var events []idem.AttemptEvent
	c := f.client(t, idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}}))
	res, err := c.Submit(t.Context(), f.req("k"))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Zero(t, srv.Stats().Requests, "nothing reached the server")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, events, idem.DefaultMaxAttempts)
	require.Equal(t, f.posts+f.gets, len(events))
	for _, ev := range events {
		require.Equalf(t, http.StatusFound, ev.StatusCode, "attempt %d", ev.Number)
		require.Errorf(t, ev.Err, "attempt %d: nothing says why it settled nothing", ev.Number)
		require.Containsf(t, ev.Err.Error(), "redirect to https://sso.example.com/login", "attempt %d", ev.Number)
		require.Containsf(t, ev.Err.Error(), "not followed", "attempt %d", ev.Number)
		require.NotContainsf(t, ev.Err.Error(), "SAMLRequest", "attempt %d: the redirect's query string journaled", ev.Number)
	}
}

// A proxy or gateway that drops the Idempotency-Key header: the server
// (the IETF draft's) refuses the request without it. Nothing executed,
// so the operation fails at once, never resent, and its reason says
// that idem did send a key, which points at what sits in between.
func TestStrippedKeyHeaderFailsOnceAndSaysSo(t *testing.T) {
	srv := newServer(t)
	f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
		r.Header.Del("Idempotency-Key")
		return false
	})
	res, err := f.client(t).Submit(t.Context(), f.req("k"))
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, 1, f.posts, "resent after the server said it never ran")
	require.Zero(t, f.gets)
	require.Zero(t, srv.Stats().SideEffects)
	require.Contains(t, res.Reason, "400: missing Idempotency-Key header", "the server's own words")
	require.Contains(t, res.Reason, "idem sent the key", "nothing says the header was lost on the way")
}

// Intermediaries' own pages answered to submits, at the default
// settings, with result queries passed on to the server. No page is
// ever read as the API's success. A gateway's 5xx (before or after the
// origin ran the request) never fails the operation: it is queried, and
// settled by the server's own answer when the origin ran it. A WAF's
// 4xx block page on a first attempt fails it: nothing reached the API.
// Every submit carries the same key and bytes.
func TestIntermediaryPagesOnSubmit(t *testing.T) {
	html := http.Header{"Content-Type": {"text/html"}}
	with := func(h http.Header, name, value string) http.Header {
		h = h.Clone()
		h.Set(name, value)
		return h
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		// reached: the front passed the first submit on to the server
		// before answering with its page (its link to the origin broke
		// after the origin committed).
		reached bool
		want    idem.State
	}{
		{name: "captive portal 200", status: 200, header: html, body: `<html><head><title>Sign in to the network</title></head><form action="/login"></form></html>`, want: idem.StateUnknown},
		{name: "F5 ASM blocking page 200", status: 200, header: html,
			body: `<html><head><title>Request Rejected</title></head><body>The requested URL was rejected. Please consult with your administrator.<br><br>Your support ID is: 1234567890123456789</body></html>`, want: idem.StateUnknown},
		{name: "Akamai Access Denied 200", status: 200, header: with(html, "Server", "AkamaiGHost"),
			body: `<HTML><HEAD><TITLE>Access Denied</TITLE></HEAD><BODY>You don't have permission to access "http&#58;&#47;&#47;api&#46;example&#46;com&#47;orders" on this server.<P>Reference&#32;&#35;18&#46;1234</BODY></HTML>`, want: idem.StateUnknown},
		{name: "Cloudflare Attention Required 403", status: 403, header: with(html, "Server", "cloudflare"),
			body: `<!DOCTYPE html><title>Attention Required! | Cloudflare</title><h1>Sorry, you have been blocked</h1>`, want: idem.StateFailed},
		{name: "Cloudflare challenge 503", status: 503, header: with(html, "Server", "cloudflare"), body: `<!DOCTYPE html><title>Just a moment...</title>`, want: idem.StateUnknown},
		{name: "Envoy 503 upstream connect error", status: 503, header: http.Header{"Content-Type": {"text/plain"}, "Server": {"envoy"}},
			body: `upstream connect error or disconnect/reset before headers. reset reason: connection failure`, want: idem.StateUnknown},
		{name: "Envoy 503 overloaded", status: 503, header: http.Header{"Content-Type": {"text/plain"}, "X-Envoy-Overloaded": {"true"}},
			body: `upstream connect error or disconnect/reset before headers. reset reason: overflow`, want: idem.StateUnknown},
		{name: "ALB 502", status: 502, header: with(html, "Server", "awselb/2.0"), body: `<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>`, want: idem.StateUnknown},
		{name: "ALB 504", status: 504, header: with(html, "Server", "awselb/2.0"), body: `<html><head><title>504 Gateway Time-out</title></head></html>`, want: idem.StateUnknown},
		{name: "Cloudflare 522", status: 522, header: with(html, "Server", "cloudflare"), body: `<title>api.example.com | 522: Connection timed out</title>`, want: idem.StateUnknown},
		{name: "nginx 200 Content-Length 0", status: 200, header: http.Header{"Content-Length": {"0"}}, want: idem.StateUnknown},
		{name: "304 to a POST", status: 304, want: idem.StateUnknown},

		{name: "ALB 502 after the origin ran it", status: 502, header: with(html, "Server", "awselb/2.0"), body: `<html><title>502 Bad Gateway</title></html>`, reached: true, want: idem.StateSucceeded},
		{name: "Envoy 504 upstream request timeout after the origin ran it", status: 504, header: http.Header{"Content-Type": {"text/plain"}, "Server": {"envoy"}},
			body: `upstream request timeout`, reached: true, want: idem.StateSucceeded},
		{name: "Envoy 503 reset after the origin ran it", status: 503, header: http.Header{"Content-Type": {"text/plain"}, "Server": {"envoy"}},
			body: `upstream connect error or disconnect/reset before headers. reset reason: connection termination`, reached: true, want: idem.StateSucceeded},
		{name: "nginx 200 Content-Length 0 after the origin ran it", status: 200, header: http.Header{"Content-Length": {"0"}}, reached: true, want: idem.StateSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
				if r.Method == http.MethodGet || tc.reached && n > 1 {
					return false
				}
				if tc.reached {
					forward()
				}
				page(w, tc.status, tc.header, tc.body)
				return true
			})
			res, err := f.client(t).Submit(t.Context(), f.req("k"))
			require.Equalf(t, tc.want, res.State, "err: %v", err)
			effects := srv.Effects("", "k")
			switch tc.want {
			case idem.StateSucceeded:
				require.NoError(t, err)
				require.Equal(t, 1, effects)
				require.Equal(t, "ord_000001", res.ResourceID, "the server's own order")
			case idem.StateFailed:
				require.ErrorIs(t, err, idem.ErrFailed)
				require.Zero(t, effects)
				require.Equal(t, 1, f.posts, "a refusal before anything may have executed is not resent")
			default:
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.NotErrorIs(t, err, idem.ErrFailed)
				require.Empty(t, res.ResourceID)
				require.Zero(t, effects)
				require.Equal(t, idem.DefaultMaxAttempts, res.Attempts)
			}
			for i, r := range srv.Requests() {
				if r.Method == http.MethodPost {
					require.Equalf(t, "k", r.Key, "submit %d reaching the server", i+1)
				}
			}
		})
	}
}

// A front that sends only informational answers (103 Early Hints, more
// than net/http reads) and then drops the connection: no final answer,
// after the request was written. Whether the origin ran it or not, the
// result query and a resend with the same key settle it with one order.
func TestInformationalOnlyAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reached bool
		hints   int
		posts   int
	}{
		{"one 103, origin ran it", true, 1, 1},
		{"too many 103s, origin ran it", true, 10, 1},
		{"one 103, origin never saw it", false, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
				if r.Method == http.MethodGet || n > 1 {
					return false
				}
				if tc.reached {
					forward()
				}
				for range tc.hints {
					w.Header().Set("Link", "</style.css>; rel=preload")
					w.WriteHeader(http.StatusEarlyHints)
				}
				dropConnection(w)
				return true
			})
			res, err := f.client(t).Submit(t.Context(), f.req("k"))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, srv.Effects("", "k"))
			require.Equal(t, tc.posts, f.posts)
			require.Equal(t, 1, f.gets, "queried once after the lost answer")
		})
	}
}

// The key header dropped on resends only, after a first attempt that
// reached the server and whose answer a load balancer lost, with no
// result endpoint: the 400s cannot fail an order that may have been
// made, and resending cannot get past them, so after three the
// operation is flagged for a person instead of resent until the
// reconciliation deadline.
func TestStrippedKeyHeaderAfterALostAnswerIsFlagged(t *testing.T) {
	srv := newServer(t)
	f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
		if n == 1 {
			forward()
			page(w, http.StatusBadGateway, http.Header{"Server": {"awselb/2.0"}}, `<html><title>502 Bad Gateway</title></html>`)
			return true
		}
		r.Header.Del("Idempotency-Key")
		return false
	})
	f.requireRefusedResendsFlagged(t)
}

// requireRefusedResendsFlagged submits key "k" through f with no result
// endpoint, the first send's answer lost after the server took it and
// every resend refused, and requires the operation left for a person
// after three refusals, never failed, with the one order made.
func (f *front) requireRefusedResendsFlagged(t testing.TB) {
	t.Helper()
	res, err := clientFor(t, f.Server, idemtest.NewClock(epoch)).Submit(t.Context(), f.req("k"))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrNeedsReview)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
	require.Equal(t, 4, f.posts, "one lost answer, then three refusals")
	require.Equal(t, 1, f.srv.Effects("", "k"))
}

// A cache keyed on less than the URL also stores error answers (CloudFront
// keeps a 404 or 410 for ten seconds by default): another key's "gone"
// served to our result query says nothing of our key, which the server
// still holds. It must not flag the operation "key expired" for a person.
// The key goes in the query string, which such a cache leaves out of its
// key (with the key in the path, the cache's entry is the key's own).
func TestCachedGoneOfAnotherKeyIsNotOurs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"410", http.StatusGone, `{"error":"gone"}`},
		{"404 saying the idempotency key expired", http.StatusNotFound, `{"error":"idempotency key expired"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.ErrorAfterCommit}))
			f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
				if r.Method != http.MethodGet {
					return false
				}
				if n == 1 {
					page(w, tc.status, http.Header{"Content-Type": {"application/json"}, "Age": {"4"}, "X-Cache": {"Error from cloudfront"}}, tc.body)
					return true
				}
				// The origin's result endpoint takes the key in its path.
				r.URL.Path, r.URL.RawQuery = "/operations/"+r.URL.Query().Get("key"), ""
				return false
			})
			res, err := f.client(t, idem.WithResultEndpoint(f.URL+"/operations?key={key}")).Submit(t.Context(), f.req("k"))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Empty(t, res.Review)
			require.Equal(t, "ord_000001", res.ResourceID)
			require.Equal(t, 1, srv.Effects("", "k"))
		})
	}
}
