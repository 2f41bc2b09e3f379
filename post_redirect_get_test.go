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

// prgApp is a web app's form handler (modelled) that places the order
// and answers as such handlers do, Post/Redirect/Get: a 302, where
// location says, after its work. An idempotency middleware keeps the
// order per key and answers the key's later requests the same. Its
// result endpoint reports the key's order. Its router runs the handler
// for /orders and /orders/ alike.
type prgApp struct {
	mu     sync.Mutex
	orders map[string]string // key → order id
	posts  []string          // the key of each POST
}

func newPRGApp(t testing.TB, location func(r *http.Request) string) (*prgApp, *httptest.Server) {
	t.Helper()
	a := &prgApp{orders: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		a.mu.Lock()
		defer a.mu.Unlock()
		switch path := strings.TrimSuffix(r.URL.Path, "/"); {
		case r.Method == http.MethodPost && path == "/orders":
			key := r.Header.Get("Idempotency-Key")
			a.posts = append(a.posts, key)
			if _, ok := a.orders[key]; !ok {
				a.orders[key] = "ord_" + key
			}
			w.Header().Set("Location", location(r))
			w.WriteHeader(http.StatusFound)
		case r.Method == http.MethodGet && strings.HasPrefix(path, "/operations/"):
			id, ok := a.orders[strings.TrimPrefix(path, "/operations/")]
			if !ok {
				resultNotFound(w)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"`+id+`","status":"succeeded"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return a, srv
}

func (a *prgApp) sent() (posts []string, orders int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.posts...), len(a.orders)
}

// A handler's 302 after its work to the URL posted to but for a
// trailing slash is no router's: a router that tells the two apart
// answers 301, 307 or 308 (TestSlashRedirectIsNotExecuted), and a
// lenient one runs the handler, whose Post/Redirect/Get answer is a 302
// by default. Express's router is not strict, "/foo" and "/foo/" are
// treated the same (expressjs.com/en/4x/api.html#express.router), and
// res.redirect's status "defaults to 302 Found"
// (expressjs.com/en/4x/api.html#res.redirect). The 302 was read as a
// router's, "nothing executed; send the request there": failed after one
// send, the order made, and the caller, doing as the reason said under a
// new key, made a second.
func TestPostRedirectGetToTheSlashlessPathIsNotFailed(t *testing.T) {
	requirePRGNotFailed(t, "/orders/", func(*http.Request) string { return "/orders" })
}

// A Laravel app that forces https in the URLs it makes
// (URL::forceScheme('https'), the common fix behind a proxy that ends
// TLS) and is reached over plain http, as by a service inside the
// cluster or on a platform that does not redirect http: its store
// action places the order and answers redirect()->route('orders.index'),
// 302 by default (Laravel's Redirector::route, $status = 302), to an
// absolute URL, the same path in https. That is the shape of a load
// balancer's upgrade and was read as one, "nothing executed": failed
// after the order was made, and the caller, sending it to the https URL
// under a new key, made a second.
func TestPostRedirectGetToHTTPSIsNotFailed(t *testing.T) {
	requirePRGNotFailed(t, "/orders", func(r *http.Request) string {
		// The Host of a request on port 80, as deployed.
		return "https://" + r.Host[:strings.LastIndexByte(r.Host, ':')] + "/orders"
	})
}

// requirePRGNotFailed submits to path of a prgApp answering with
// location: the order was made, so the 302 may have executed, settled by
// the result endpoint as the order made, or, without one, left unknown
// after resends with the same key, one order either way.
func requirePRGNotFailed(t *testing.T, path string, location func(r *http.Request) string) {
	t.Helper()
	for _, withResult := range []bool{true, false} {
		name := "no result endpoint"
		if withResult {
			name = "result endpoint"
		}
		t.Run(name, func(t *testing.T) {
			a, srv := newPRGApp(t, location)
			var opts []idem.Option
			if withResult {
				opts = append(opts, idem.WithResultEndpoint(srv.URL+"/operations/{key}"))
			}
			c := clientFor(t, srv, idemtest.NewClock(epoch), opts...)

			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + path, Body: chargeBody})
			require.NotErrorIs(t, err, idem.ErrFailed, "the order was made")
			require.NotEqual(t, idem.StateFailed, res.State)
			posts, orders := a.sent()
			require.Equal(t, 1, orders)
			for i, k := range posts {
				require.Equalf(t, "k", k, "POST %d", i+1)
			}
			if withResult {
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, "ord_k", res.ResourceID)
				require.Len(t, posts, 1, "settled by the query, never resent")
				return
			}
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Len(t, posts, idem.DefaultMaxAttempts)
		})
	}
}
