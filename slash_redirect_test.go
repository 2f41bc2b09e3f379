package idem_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// slashRouter is a web framework's router in front of an orders handler
// mounted at /orders/ only: a POST to /orders never reaches the handler.
// FastAPI (redirect_slashes) answers it 307 to /orders/, Flask/Werkzeug
// (strict_slashes) 308, Django's APPEND_SLASH 301. The handler, had it
// run, would have created an order per key.
type slashRouter struct {
	mu      sync.Mutex
	posts   []string // paths posted to
	orders  map[string]bool
	status  int
	relLocn bool // a Location relative to the request, as Werkzeug may send
}

func newSlashRouter(t testing.TB, status int, relative bool) (*slashRouter, *httptest.Server) {
	t.Helper()
	s := &slashRouter{orders: map[string]bool{}, status: status, relLocn: relative}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Method == http.MethodPost {
			s.posts = append(s.posts, r.URL.RequestURI())
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/orders/":
			s.orders[r.Header.Get("Idempotency-Key")] = true
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"ord_1","status":"succeeded"}`)
		case !strings.HasSuffix(r.URL.Path, "/"):
			loc := "http://" + r.Host + r.URL.Path + "/"
			if s.relLocn {
				loc = r.URL.Path + "/"
			}
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", loc)
			w.WriteHeader(s.status)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

// A URL missing its trailing slash is a mistake in the caller's
// configuration, and the router's redirect says so before any handler
// runs. It was read as "may have executed": queried, resent with the same
// key to the same URL until the budget ran out, then left unknown for Run
// to resend until the key window passed and a person had to settle an
// order that was never placed. The redirect says the request was not
// executed: failed at once, with a reason that names the URL to use, and
// nothing resent.
func TestSlashRedirectIsNotExecuted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		relative bool
		query    string
	}{
		{"FastAPI 307", http.StatusTemporaryRedirect, false, ""},
		{"Werkzeug 308, relative Location", http.StatusPermanentRedirect, true, ""},
		{"Django 301, with a query", http.StatusMovedPermanently, false, "?account=a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := newSlashRouter(t, tc.status, tc.relative)
			c := clientFor(t, srv, idemtest.NewClock(epoch))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders" + tc.query, Body: chargeBody})
			require.ErrorIs(t, err, idem.ErrFailed, "%v", err)
			require.Equal(t, idem.StateFailed, res.State)
			require.Contains(t, err.Error(), srv.URL+"/orders/"+tc.query, "the error names the URL to use")
			require.Equal(t, []string{"/orders" + tc.query}, s.posts, "sent once, never to the redirect's target")
			require.Empty(t, s.orders)

			// Nothing left for Resume to resend.
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Zero(t, sum.Visited)
			require.Len(t, s.posts, 1)
		})
	}
}

// A load balancer that upgrades http to https answers before any server
// behind it sees the request: the same, 301 (Django's
// SECURE_SSL_REDIRECT), 307 (ASP.NET Core's UseHttpsRedirection) or 308.
// Not a 302: a handler's redirect after its work may be one
// (TestPostRedirectGetToHTTPSIsNotFailed).
func TestHTTPSUpgradeRedirectIsNotExecuted(t *testing.T) {
	for _, status := range []int{http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusMovedPermanently} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv, posts := countingServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Location", "https://"+r.Host[:strings.LastIndexByte(r.Host, ':')]+r.URL.RequestURI())
				w.WriteHeader(status)
			})
			c := clientFor(t, srv, idemtest.NewClock(epoch))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: chargeBody})
			require.ErrorIs(t, err, idem.ErrFailed, "%v", err)
			require.Equal(t, idem.StateFailed, res.State)
			require.Contains(t, err.Error(), "https://127.0.0.1/orders")
			require.Equal(t, 1, posts())
		})
	}
}

// When an earlier attempt's answer was lost, that attempt may have run
// (a deploy may have changed the routes since): a router's redirect now
// says nothing of it, and the operation is not failed.
func TestSlashRedirectAfterLostAnswerIsNotFailed(t *testing.T) {
	srv, posts := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close() // the answer is lost
			}
			return
		}
		w.Header().Set("Location", r.URL.Path+"/")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	c := clientFor(t, srv, idemtest.NewClock(epoch))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: chargeBody})
	require.Error(t, err)
	require.False(t, errors.Is(err, idem.ErrFailed), "%v", err)
	require.NotEqual(t, idem.StateFailed, res.State)
	require.Greater(t, posts(), 1)
}

// Only a router's redirect proves nothing ran: a redirect elsewhere (to
// the created order, to a login page), or to the same path with another
// query or host, may follow a handler's work, and stays ambiguous.
func TestOtherRedirectsStayAmbiguous(t *testing.T) {
	for _, loc := range []string{"/orders/ord_1", "/login?next=/orders", "/orders/?other=1", "//elsewhere.example/orders/"} {
		t.Run(loc, func(t *testing.T) {
			srv, posts := countingServer(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusTemporaryRedirect)
			})
			c := clientFor(t, srv, idemtest.NewClock(epoch))

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: chargeBody})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "%v", err)
			require.False(t, errors.Is(err, idem.ErrFailed))
			require.Equal(t, idem.StateUnknown, res.State)
			require.Greater(t, posts(), 1, "resent with the same key")
		})
	}
}

// countingServer serves every request with answer, handing it the
// request's number (from 1), and returns the server and a count of the
// requests it has had.
func countingServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) (*httptest.Server, func() int) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(w, r, int(n.Add(1)))
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { return int(n.Load()) }
}

// A request hook that adds the API key to the query string (as Django
// REST APIs taking ?api_key= have it) made the router's redirect, which
// keeps the query as sent (Django's APPEND_SLASH), point to another query
// than the journaled URL's: read as a redirect elsewhere, "may have
// executed", queried and resent until the budget ran out. The redirect is
// the router's as before; its reason names the journaled URL with the
// slash, never the hook's key.
func TestSlashRedirectOfHookQueryIsNotExecuted(t *testing.T) {
	const secret = "sk_live_HOOK_QUERY"
	s, srv := newSlashRouter(t, http.StatusMovedPermanently, false)
	c := clientFor(t, srv, idemtest.NewClock(epoch), idem.WithRequestHook(func(r *http.Request) error {
		q := r.URL.Query()
		q.Set("api_key", secret)
		r.URL.RawQuery = q.Encode()
		return nil
	}))

	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders?account=a1", Body: chargeBody})
	require.ErrorIs(t, err, idem.ErrFailed, "%v", err)
	require.Equal(t, idem.StateFailed, res.State)
	require.Contains(t, err.Error(), srv.URL+"/orders/?account=a1", "the error names the URL to use")
	require.NotContains(t, err.Error(), secret)
	require.NotContains(t, res.Reason, secret)
	require.Equal(t, []string{"/orders?account=a1&api_key=" + secret}, s.posts, "sent once, never to the redirect's target")
	require.Empty(t, s.orders)
}
