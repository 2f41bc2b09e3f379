package idem_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// outage is a transport between the client and the fake server whose
// network can lose every answer (the server executes, the client hears
// nothing), refuse every connection (the server is down), or answer as a
// CDN in front of a server that is down.
type outage struct {
	base    http.RoundTripper
	mode    atomic.Int32 // one of netUp, netLossy, netDown, netOriginDown, netFailedOver, netNoTargets, netReadBehind, netDatabaseDown, netIdentityDown, netKeyRejected
	refused atomic.Int64
	then    atomic.Int32 // netFailedOver: the mode after its one failover
	behind  sync.Map     // netReadBehind: the result URLs asked once since
}

const (
	netUp = iota
	netLossy
	netDown
	// netOriginDown: Cloudflare's edge answers for an origin that refuses
	// its connections, with its own page: 521 "Web server is down"
	// (support.cloudflare.com/hc/en-us/articles/115003011431, "5xx Server
	// Error": 520-527 and 530 are Cloudflare's, about the origin).
	netOriginDown
	// netFailedOver: Cloudflare Load Balancing's zero-downtime failover,
	// "a single retry only if there is another healthy endpoint in the
	// pool and a 521, 522, 523, 525 or 526 error code is occurring", for
	// any method (developers.cloudflare.com/load-balancing/understand-basics/
	// adaptive-routing/): the origin takes the request but its answer is
	// lost on the way back, Cloudflare's 522 ("After a connection is
	// established, the origin web server does not acknowledge (ACK)
	// Cloudflare's resource request within 90 seconds": .../cloudflare-5xx-
	// errors/error-522/), and the retry finds the pool's other origin
	// refusing connections: the client gets that origin's 521 page, as
	// netOriginDown's, nothing in it saying a failover happened. Once: the
	// mode is then o.then.
	netFailedOver
	// netNoTargets: an AWS Application Load Balancer with no target to
	// pass requests on to answers every one with its own 503 ("The
	// target groups for the load balancer have no registered targets":
	// docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-troubleshooting.html).
	netNoTargets
	// netReadBehind: the server is back, its read path a step behind: the
	// first result query for each operation finds nothing, as a read
	// replica still replaying what the primary committed before the
	// outage does (DESIGN.md: "not found" is not "never happened"); the
	// next finds what the server holds.
	netReadBehind
	// netDatabaseDown: the API's servers run, their database does not:
	// every request, a result query too, gets the framework's own 500
	// page (Rails renders public/500.html for ActiveRecord's
	// ConnectionNotEstablished; guides.rubyonrails.org/action_controller_overview.html,
	// "Rescue"), and nothing executes. Modelled: the page says nothing of
	// the operation asked about.
	netDatabaseDown
	// netIdentityDown: Envoy's jwt_authn filter (Istio's
	// RequestAuthentication) in front of the API, its identity
	// provider's JWKS endpoint down: "If fetching fails, the original
	// request will fail with 401" (envoyproxy/envoy#13705; #41669:
	// "Jwks remote fetch is failed"), every request, the request never
	// passed on.
	netIdentityDown
	// netKeyRejected: AWS API Gateway refusing the client's API key
	// (expired, or revoked by a leak) until the caller rotates it: 403
	// ForbiddenException "Invalid API Key identifier specified"
	// (repost.aws/knowledge-center/api-gateway-troubleshoot-403-forbidden),
	// the request never passed on.
	netKeyRejected
)

func (o *outage) RoundTrip(r *http.Request) (*http.Response, error) {
	switch o.mode.Load() {
	case netDown:
		if r.Body != nil {
			_ = r.Body.Close()
		}
		o.refused.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case netOriginDown:
		o.refused.Add(1)
		return originDown(r), nil
	case netFailedOver:
		o.mode.Store(o.then.Load())
		if resp, err := o.base.RoundTrip(r); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return originDown(r), nil
	case netNoTargets:
		o.refused.Add(1)
		return noTargets(r), nil
	case netDatabaseDown:
		o.refused.Add(1)
		return frontPage(r, http.StatusInternalServerError, http.Header{},
			`<!DOCTYPE html><html><head><title>We're sorry, but something went wrong (500)</title></head><body><h1>We're sorry, but something went wrong.</h1></body></html>`), nil
	case netIdentityDown:
		o.refused.Add(1)
		return refusedAtGate(r, http.StatusUnauthorized, "text/plain", "Jwks remote fetch is failed"), nil
	case netKeyRejected:
		o.refused.Add(1)
		return refusedAtGate(r, http.StatusForbidden, "application/json", `{"message":"Invalid API Key identifier specified"}`), nil
	case netReadBehind:
		if _, asked := o.behind.LoadOrStore(r.URL.Path, true); r.Method == http.MethodGet && !asked {
			resp := frontPage(r, http.StatusNotFound, http.Header{}, `{"error":"not found"}`)
			resp.Header.Set("Content-Type", "application/json")
			return resp, nil
		}
	case netLossy:
		resp, err := o.base.RoundTrip(r)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return nil, errors.New("read: connection reset by peer")
	}
	return o.base.RoundTrip(r)
}

// originDown is Cloudflare's answer to r for an origin that refuses its
// connections: its own 521 page, the request never passed on.
func originDown(r *http.Request) *http.Response {
	return frontPage(r, 521, http.Header{"Server": {"cloudflare"}, "Cf-Ray": {"8f3e9500a5207d3-MIA"}},
		`<!DOCTYPE html><title>api.example.com | 521: Web server is down</title><span class="cf-error-code">521</span>`)
}

// noTargets is an AWS Application Load Balancer's answer to r with no
// registered target: its own 503 page, the request never passed on.
func noTargets(r *http.Request) *http.Response {
	return frontPage(r, http.StatusServiceUnavailable, http.Header{"Server": {"awselb/2.0"}},
		`<html><head><title>503 Service Temporarily Unavailable</title></head><body><center><h1>503 Service Temporarily Unavailable</h1></center></body></html>`)
}

// refusedAtGate is a gateway's refusal of r's credentials, status with
// body of contentType, the request never passed on.
func refusedAtGate(r *http.Request, status int, contentType, body string) *http.Response {
	resp := frontPage(r, status, http.Header{}, body)
	resp.Header.Set("Content-Type", contentType)
	return resp
}

// frontPage is a front end's own HTML page of status answering r.
func frontPage(r *http.Request, status int, h http.Header, page string) *http.Response {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	h.Set("Content-Type", "text/html; charset=UTF-8")
	return &http.Response{StatusCode: status, Status: fmt.Sprint(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: h, Body: io.NopCloser(strings.NewReader(page)), ContentLength: int64(len(page))}
}

// A restart during an outage must not hold the service's start-up for as
// long as its whole backlog times the per-call budget: Resume gives up
// after a run of visits that got nowhere, leaves the rest journaled and
// due, and a later Resume settles every one, each executed once. Default
// settings but the clock.
func TestResumeLeavesBacklogToReconcilerDuringOutage(t *testing.T) {
	const n = 100
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now))
	network := &outage{base: srv.Client().Transport}
	open, closeAll := restarts(t, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
		idem.WithResultEndpoint(srv.URL+"/operations/{key}"))

	// The outage begins as answers get lost: each order executes, its
	// caller hears nothing.
	network.mode.Store(netLossy)
	store, c := open()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("outage-%03d", i)
		_, err := c.Submit(t.Context(), idem.Request{Key: keys[i], URL: srv.URL + "/orders", Body: fmt.Appendf(nil, `{"order":%d}`, i)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, keys[i])
	}
	closeAll(store, c)

	// The service restarts while the server is down.
	network.mode.Store(netDown)
	store, c = open()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	visited := n - sum.Deferred
	giveUp := 2 * idem.DefaultResumeConcurrency
	require.Equal(t, n, sum.Visited, "open operations found")
	require.GreaterOrEqual(t, visited, giveUp, "visits before giving up")
	require.LessOrEqual(t, visited, giveUp+idem.DefaultResumeConcurrency-1, "visits started after the server looked unreachable (%+v)", sum)
	require.Equal(t, visited, sum.Unknown+sum.Pending, "every visit ended without progress (%+v)", sum)
	require.LessOrEqual(t, network.refused.Load(), int64(visited*idem.DefaultMaxAttempts), "requests tried during the outage")
	left, err := c.List(t.Context(), idem.Filter{Open: true})
	require.NoError(t, err)
	require.Len(t, left, n, "every operation stays journaled and open")
	closeAll(store, c)

	// The server is back: the next start-up settles all of them.
	network.mode.Store(netUp)
	resumeSettlesAll(t, open, closeAll, srv, keys)
}

// resumeSettlesAll starts a process (open) whose Resume must settle every
// one of keys as succeeded, each executed once by srv (which scopes keys
// by Authorization: none here), and ends it.
func resumeSettlesAll(t *testing.T, open func(...idem.Option) (*journal.Store, *idem.Client), closeAll func(*journal.Store, *idem.Client), srv *idemtest.Server, keys []string) {
	t.Helper()
	store, c := open()
	defer closeAll(store, c)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: len(keys), Succeeded: len(keys)}, sum)
	for _, k := range keys {
		require.Equal(t, 1, srv.Effects("", k), "side effects of %s", k)
	}
}

// restarts gives a test one journal file that each open makes a new
// process of: its own journal.Store and Client, with opts and then
// extra; closeAll ends that process.
func restarts(t *testing.T, opts ...idem.Option) (open func(extra ...idem.Option) (*journal.Store, *idem.Client), closeAll func(*journal.Store, *idem.Client)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.journal")
	open = func(extra ...idem.Option) (*journal.Store, *idem.Client) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, append(slices.Clip(opts), extra...)...)
		require.NoError(t, err)
		return store, c
	}
	closeAll = func(store *journal.Store, c *idem.Client) {
		require.NoError(t, c.Close())
		require.NoError(t, store.Close())
	}
	return open, closeAll
}

// downAndUp starts two fake servers on clock: one to be taken down, one
// that stays up.
func downAndUp(t *testing.T, clock *idemtest.Clock) (down, up *idemtest.Server) {
	t.Helper()
	return newServer(t, idemtest.WithClock(clock.Now)), newServer(t, idemtest.WithClock(clock.Now))
}

// hostDown refuses every connection to one host and passes the rest
// through: one of the servers a service calls is down, the others are
// not.
type hostDown struct {
	base    http.RoundTripper
	host    string
	edge    bool // a CDN's edge answers for the host (originDown)
	refused atomic.Int64
	back    atomic.Bool // the host is up again
}

func (h *hostDown) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != h.host || h.back.Load() {
		return h.base.RoundTrip(r)
	}
	h.refused.Add(1)
	if h.edge {
		return originDown(r), nil
	}
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// One server down must neither hold start-up for its whole backlog nor
// make Resume leave the healthy servers' operations unsettled: it gives
// up on the host that looks unreachable, and on that host only, however
// the two hosts' operations are ordered in the journal. Default settings
// but the clock.
func TestResumeGivesUpOnTheUnreachableHostOnly(t *testing.T) {
	const perHost = 60
	giveUp := 2 * idem.DefaultResumeConcurrency
	for _, order := range []string{"interleaved", "down-host-first"} {
		t.Run(order, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			down, up := downAndUp(t, clock)
			lossy := &outage{base: http.DefaultTransport}
			lossy.mode.Store(netLossy)
			path := filepath.Join(t.TempDir(), "idem.journal")
			open := func(rt http.RoundTripper) (*journal.Store, *idem.Client) {
				store, err := journal.Open(path)
				require.NoError(t, err)
				c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: rt}), idem.WithClock(clock))
				require.NoError(t, err)
				return store, c
			}

			// Every answer is lost: both servers' orders execute, unconfirmed.
			store, c := open(lossy)
			type op struct {
				srv *idemtest.Server
				key string
			}
			var ops []op
			for i := range perHost {
				ops = append(ops, op{down, fmt.Sprintf("%03d-down", i)}, op{up, fmt.Sprintf("%03d-up", i)})
			}
			if order == "down-host-first" {
				ops = ops[:0]
				for i := range perHost {
					ops = append(ops, op{down, fmt.Sprintf("a-%03d", i)})
				}
				for i := range perHost {
					ops = append(ops, op{up, fmt.Sprintf("b-%03d", i)})
				}
			}
			for _, o := range ops {
				_, err := c.Submit(t.Context(), idem.Request{Key: o.key, URL: o.srv.URL + "/orders", Body: []byte(`{"order":1}`)})
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, o.key)
			}
			require.NoError(t, c.Close())
			require.NoError(t, store.Close())

			// Restart with one server down.
			network := &hostDown{base: http.DefaultTransport, host: strings.TrimPrefix(down.URL, "http://")}
			store, c = open(network)
			defer func() {
				require.NoError(t, c.Close())
				require.NoError(t, store.Close())
			}()
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 2*perHost, sum.Visited, "open operations found")
			require.Equal(t, perHost, sum.Succeeded, "the healthy server's operations settle (%+v)", sum)
			visitedDown := perHost - sum.Deferred
			require.GreaterOrEqual(t, visitedDown, giveUp, "visits to the down host before giving up on it (%+v)", sum)
			require.LessOrEqual(t, visitedDown, giveUp+idem.DefaultResumeConcurrency-1, "visits to the down host (%+v)", sum)
			require.Equal(t, visitedDown, sum.Unknown+sum.Pending, "the down host's visits got nowhere (%+v)", sum)
			// Each visit's attempts, and at most one HEAD each asking the
			// host's clock before its first resend: refused, it taught
			// nothing, and the next visit asks again.
			require.LessOrEqual(t, network.refused.Load(), int64(visitedDown*(idem.DefaultMaxAttempts+1)), "requests to the down host")
			for _, o := range ops {
				if o.srv == up {
					require.Equal(t, 1, up.Effects("", o.key), "side effects of %s", o.key)
				}
			}
			left, err := c.List(t.Context(), idem.Filter{Open: true})
			require.NoError(t, err)
			require.Len(t, left, perHost, "the down host's operations stay journaled and open")
		})
	}
}

// A network down for every host must stop Resume as one host down does,
// though no host has enough operations to be given up on by itself.
func TestResumeStopsWhenEveryHostIsDown(t *testing.T) {
	const hosts, perHost = 12, 5
	giveUp := 2 * idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	network := &outage{}
	network.mode.Store(netDown)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock))
	require.NoError(t, err)
	defer func() {
		require.NoError(t, c.Close())
		require.NoError(t, store.Close())
	}()
	for i := range hosts * perHost {
		// Never dialled: the transport refuses every connection first.
		url := fmt.Sprintf("http://127.0.0.1:%d/orders", 40000+i%hosts)
		_, err := c.Submit(t.Context(), idem.Request{Key: fmt.Sprintf("%03d", i), URL: url, Body: []byte(`{}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	}
	sent := network.refused.Load()

	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	visited := hosts*perHost - sum.Deferred
	require.Equal(t, hosts*perHost, sum.Visited, "open operations found")
	require.GreaterOrEqual(t, visited, giveUp, "visits before giving up (%+v)", sum)
	// Across hosts Resume visits twice WithResumeConcurrency at once (so
	// that a slow host leaves the others their share): those under way
	// when the streak ends still end.
	require.LessOrEqual(t, visited, giveUp+2*idem.DefaultResumeConcurrency-1, "visits started after every host looked unreachable (%+v)", sum)
	require.Equal(t, visited, sum.Unknown+sum.Pending, "no visit got anywhere (%+v)", sum)
	require.LessOrEqual(t, network.refused.Load()-sent, int64(visited*idem.DefaultMaxAttempts), "requests tried")
}
