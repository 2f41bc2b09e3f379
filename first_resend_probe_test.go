package idem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// stripeBacklog starts a Stripe-like server on a clock at epoch, the true
// time (it replays a key within DefaultKeyRetention, forgets it after,
// and sends Date on every answer), and journals n orders to it, keyed
// prefix00 on, each executed and its answer lost, with no result
// endpoint (lostOrders).
func stripeBacklog(t *testing.T, prefix string, n int) (clock *idemtest.Clock, srv *idemtest.Server, path string, keys []string) {
	t.Helper()
	clock = idemtest.NewClock(epoch)
	srv = newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.DefaultKeyRetention))
	path = filepath.Join(t.TempDir(), "idem.journal")
	return clock, srv, path, lostNumbered(t, srv, clock, path, prefix, n)
}

// lostNumbered journals at path n orders to srv, keyed prefix00 on, with
// no result endpoint (lostOrders), and returns their keys.
func lostNumbered(t *testing.T, srv *idemtest.Server, clock *idemtest.Clock, path, prefix string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	lostOrders(t, srv, clock, path, false, keys...)
	return keys
}

// serverHeads counts srv's HEAD requests, the clock probes, and fails on
// one that carried a key or was answered otherwise than an order API
// answers a method it does not route (405, nothing created), on the
// orders path or the host's root.
func serverHeads(t *testing.T, srv *idemtest.Server) int {
	t.Helper()
	n := 0
	for _, r := range srv.Requests() {
		if r.Method != http.MethodHead {
			continue
		}
		require.Empty(t, r.RawKey, "a clock probe with a key")
		require.Equal(t, http.StatusMethodNotAllowed, r.Status, "the probe's answer")
		// The host's root only after a probe to the path timed out.
		require.Contains(t, []string{"/orders", "/"}, r.Path, "the probe's path")
		n++
	}
	return n
}

// openBlackholed opens the journal at path, closed with the test, and a
// blackhole in front of srv's host; cut ends its held requests, and is
// called with the test too, so that a failing test leaves none held.
func openBlackholed(t *testing.T, path string, srv *idemtest.Server) (store *journal.Store, network *blackhole, cut func()) {
	t.Helper()
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	network = newBlackhole(http.DefaultTransport, strings.TrimPrefix(srv.URL, "http://"))
	cut = sync.OnceFunc(func() { close(network.cut) })
	t.Cleanup(cut)
	return store, network, cut
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot, an RTC wrong at boot before NTP steps it) calls Resume at
// start-up, or starts Run, with nothing sent since it started. Orders
// taken 70 minutes ago had their answers lost; the server is Stripe-like
// (it replays a key within its window, forgets it after, and sends Date
// on every answer, RFC 9110 6.6.1) and has no result endpoint, and keeps
// keys 20 minutes, the client's default window. By the stepped clock the
// keys are 10 minutes old: a resend is a second order each. The first
// visits to the host, up to WithResumeConcurrency at once, had no Date to
// judge them by (8 second orders of 40); then one resend went first, as
// the host's probe, and was itself a second order. Now one HEAD asks the
// host's clock (RFC 9110 9.3.2: safe, nothing executed; the server, an
// order API, answers 405 with its Date), the resends wait for it, and
// its Date says every key is past the window: no second order, every key
// flagged ReviewClockStepped, never resent.
func TestFirstResendToAHostTeachesItsClockBeforeTheOthers(t *testing.T) {
	// A shared cache in front of the API (a CDN, Varnish) stored a HEAD's
	// 405 hours ago, with the origin's max-age on it: it answers a HEAD
	// from its copy, whose Date is the origin's then (RFC 9111 4: a cache
	// never rewrites Date; it adds Age), unless the request says no-cache
	// (RFC 9111 5.2.1.4), when it asks the origin. That stale Date would
	// teach a clock as far behind as the stepped one, and every key would
	// look fresh: the probe asks past the cache.
	stored := epoch.Add(-2 * time.Hour)
	for _, tc := range []struct {
		name  string
		run   bool
		cache bool
	}{{"Resume", false, false}, {"Run", true, false}, {"Resume past a shared cache", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cache := &staleHeadCache{date: stored.UTC().Format(http.TimeFormat), age: 70*time.Minute + epoch.Sub(stored)}
			clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
				if !tc.cache {
					return base
				}
				cache.base = base
				return cache
			})
			if tc.run {
				// Every operation visited: the first pass takes them all.
				runUntil(t, &env{t: t, clock: clock, client: c, ctx: t.Context()}, clock.Now().Add(10*time.Minute))
			} else {
				_, err := c.Resume(t.Context())
				require.NoError(t, err)
			}

			for _, k := range keys {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
				require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
				require.Lenf(t, rec.Attempts, 1, "attempts of %s: the lost one", k)
			}
			lost := map[string]int{}
			for _, k := range keys {
				lost[k] = 1
			}
			require.Equal(t, lost, serverSubmits(t, srv), "submits per key: the lost one, no resend")
			require.Equal(t, 1, serverHeads(t, srv), "clock probes that reached the origin")
			require.Zero(t, cache.hits.Load(), "HEADs the cache answered from its copy")
		})
	}
}

// steppedBackHour journals 40 orders to a Stripe-like server (stripeBacklog)
// and, 70 minutes later by the server's clock, opens a client on them
// whose clock reads an hour behind (a VM restored from a snapshot), its
// requests through wrap: by its clock the keys are 10 minutes old; the
// server forgot them 50 minutes ago.
func steppedBackHour(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (clock *idemtest.Clock, srv *idemtest.Server, store *journal.Store, keys []string, c *idem.Client) {
	t.Helper()
	clock, srv, path, keys := stripeBacklog(t, "old", 40)
	clock.Advance(70 * time.Minute)
	clk := &skewedClock{Clock: clock}
	clk.offset.Store(int64(-time.Hour))
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	c, err = idem.New(store, idem.WithHTTPClient(&http.Client{Transport: wrap(srv.Client().Transport)}), idem.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return clock, srv, store, keys, c
}

// blackhole is a host that accepts connections and never answers (a
// firewall dropping packets, a load balancer with no healthy backend that
// holds the connection): each request to it ends when its attempt times
// out, or, once cut is closed, at once with a reset (the balancer's idle
// reset). The others pass through. It records its requests, and whether
// any arrived while the first was held.
type blackhole struct {
	base http.RoundTripper
	host string
	cut  chan struct{}

	mu          sync.Mutex
	arrived     int
	firstOver   bool
	beside      int            // requests that arrived while the first was held
	keys        map[string]int // requests per Idempotency-Key
	heads       int            // HEAD requests, the clock probes
	firstMethod string
	firstEnded  chan struct{}
}

func newBlackhole(base http.RoundTripper, host string) *blackhole {
	return &blackhole{base: base, host: host, cut: make(chan struct{}), keys: map[string]int{},
		firstEnded: make(chan struct{})}
}

func (b *blackhole) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != b.host {
		return b.base.RoundTrip(r)
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body) // accepted, whole
		_ = r.Body.Close()
	}
	b.mu.Lock()
	b.keys[r.Header.Get(idem.DefaultKeyHeader)]++
	b.arrived++
	first := b.arrived == 1
	if first {
		b.firstMethod = r.Method
	}
	if r.Method == http.MethodHead {
		b.heads++
	}
	if !first && !b.firstOver {
		b.beside++
	}
	b.mu.Unlock()
	var err error
	select {
	case <-r.Context().Done():
		err = r.Context().Err()
	case <-b.cut:
		err = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	b.mu.Lock()
	if first {
		b.firstOver = true
		close(b.firstEnded)
	}
	b.mu.Unlock()
	return nil, err
}

// succeededOf is how many of keys store holds succeeded.
func succeededOf(t *testing.T, store *journal.Store, keys []string) int {
	t.Helper()
	n := 0
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		if rec.State == idem.StateSucceeded {
			n++
		}
	}
	return n
}

// laggingOrders journals, on a client whose clock is right, one order per
// key to srv, with srv's result endpoint, each executed by the server and
// its answer lost, and the endpoint answering 404 for an hour after (a
// replica behind): one attempt each, unknown. Resume asks, is told "not
// found", and resends at once.
func laggingOrders(t *testing.T, srv *idemtest.Server, clock *idemtest.Clock, path string, keys ...string) {
	t.Helper()
	store, err := journal.Open(path)
	require.NoError(t, err)
	lossy := &outage{base: http.DefaultTransport}
	lossy.mode.Store(netLossy)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: lossy}), idem.WithClock(clock),
		idem.WithMaxAttempts(1), idem.WithResultEndpoint(srv.ResultTemplate()))
	require.NoError(t, err)
	for _, k := range keys {
		require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: k, Delay: time.Hour}))
		_, err := c.Submit(t.Context(), idem.Request{Key: k, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, k)
	}
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())
}

// Resume at start-up, with no result endpoint for a host that accepts
// connections and never answers (a firewall dropping packets, a balancer
// with no healthy backend), must not spend one attempt timeout per
// operation on the probe: the HEAD asking the host's clock goes alone,
// and once its attempt times out (no Date learnt: nothing to judge by),
// none of the resends behind it is sent: each operation is left unknown,
// due when the host may be asked again, an attempt timeout later
// (TestClockProbeTimedOutAtStartUpIsAskedAgain; a host only slow would
// have taken them on a clock nothing taught:
// TestClockProbeTimedOutHoldsTheResendsToASlowHost).
// Meanwhile another host, with a result endpoint, is not held: its
// operations, asked about and resent with the clock their query's answer
// taught, settle while the probe is still out, each executed once.
// Default settings but the clock: the probe ends by the real attempt
// timeout.
func TestFirstResendProbeToASilentHostHoldsTheRestOneAttempt(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	const backlog = 10
	clock := idemtest.NewClock(epoch)
	silent, healthy := downAndUp(t, clock)
	healthyKeys := []string{"healthy-0", "healthy-1", "healthy-2"}
	path := filepath.Join(t.TempDir(), "idem.journal")
	keys := lostNumbered(t, silent, clock, path, "silent-", backlog)
	laggingOrders(t, healthy, clock, path, healthyKeys...)
	clock.Advance(2 * time.Minute)
	store, network, _ := openBlackholed(t, path, silent)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	done := make(chan error, 1)
	go func() {
		_, err := c.Resume(t.Context())
		done <- err
	}()

	// While the probe is out, the healthy host's operations settle.
	deadline := time.After(idem.DefaultAttemptTimeout * 3 / 4)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for settled := 0; settled < len(healthyKeys); {
		select {
		case err := <-done:
			t.Fatalf("Resume() returned %v while the probe was out", err)
		case <-network.firstEnded:
			t.Fatal("the probe ended before the healthy host's operations settled")
		case <-deadline:
			t.Fatalf("%d of %d healthy operations settled while the probe was out", settled, len(healthyKeys))
		case <-poll.C:
		}
		settled = succeededOf(t, store, healthyKeys)
	}
	select {
	case <-network.firstEnded: // by the attempt timeout
	case <-time.After(2 * idem.DefaultAttemptTimeout):
		t.Fatal("the probe's attempt did not end")
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(idem.DefaultAttemptTimeout / 2):
		t.Fatal("Resume did not end once the probe timed out")
	}

	network.mu.Lock()
	arrived, beside, sent := network.arrived, network.beside, maps.Clone(network.keys)
	heads, first := network.heads, network.firstMethod
	network.mu.Unlock()
	require.Equal(t, http.MethodHead, first, "the first request to the silent host: the probe")
	require.Equal(t, 1, heads, "clock probes to the silent host")
	require.Equal(t, 1, arrived, "requests to the silent host: the probe only")
	require.Equal(t, map[string]int{"": 1}, sent, "requests to the silent host per key: none with one")
	require.Zero(t, beside, "requests to the silent host sent beside the probe")
	healthySubmits := serverSubmits(t, healthy)
	for _, k := range healthyKeys {
		require.Equalf(t, 1, healthy.Effects("", k), "orders for %s", k)
		require.Equalf(t, 2, healthySubmits[k], "submits of %s (the lost one, the resend)", k)
	}
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateUnknown, rec.State, "state of %s with its host silent", k)
		require.Equalf(t, 1, silent.Effects("", k), "orders for %s", k)
		require.Lenf(t, rec.Attempts, 1, "attempts journaled for %s: the lost one", k)
	}
}

// A host whose answers carry no usable Date has no clock to learn: none
// (RFC 9110 6.6.1 lets an origin without a clock leave it out), or one
// no IMF-fixdate (a device's garble). Once the HEAD asking its clock was
// answered so, the resends go as they did before the probe existed, each
// replayed by the server (Stripe-like, inside its window), one order
// each, nothing flagged; one HEAD in all.
func TestFirstResendProbeWithoutADateChangesNothing(t *testing.T) {
	for _, tc := range []struct{ name, date string }{
		{"absent", ""},
		{"garbled", "yesterday, about noon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resumeReplayed(t, 0, func(base http.RoundTripper) http.RoundTripper {
				return &dateTransport{base: base, date: func() string { return tc.date }}
			})
		})
	}
}

// A process restarted with its clock five minutes behind (an RTC NTP has
// not stepped yet) resumes orders whose answers were lost ten minutes ago
// by the server's clock: inside the Stripe-like server's window by its
// clock too, so each key is still held and a resend is replayed. The one
// HEAD asks the host's clock; its Date says the keys are in the window;
// each is then resent once with its key and replayed: one order each,
// nothing flagged.
func TestClockProbeLetsResendsInsideTheWindowGo(t *testing.T) {
	resumeReplayed(t, -5*time.Minute, func(base http.RoundTripper) http.RoundTripper { return base })
}

// resumeReplayed resumes, on a client whose clock is off by skew and
// whose requests go through wrap, a backlog of orders to a Stripe-like
// server whose answers were lost ten minutes ago, inside its window, and
// checks that one HEAD asked the host's clock and that each order was
// resent once with its key and replayed: one order each, nothing flagged.
func resumeReplayed(t *testing.T, skew time.Duration, wrap func(http.RoundTripper) http.RoundTripper) {
	t.Helper()
	const backlog = 20
	clock, srv, path, keys := stripeBacklog(t, "k", backlog)
	clock.Advance(10 * time.Minute)

	clk := &skewedClock{Clock: clock}
	clk.offset.Store(int64(skew))
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: wrap(srv.Client().Transport)}), idem.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: backlog, Succeeded: backlog}, sum)

	want := map[string]int{}
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateSucceeded, rec.State, "%s: review %q", k, rec.Review)
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		require.Lenf(t, rec.Attempts, 2, "attempts of %s: the lost one, the resend", k)
		want[k] = 2
	}
	require.Equal(t, want, serverSubmits(t, srv), "submits per key: the lost one, the resend")
	require.Equal(t, 1, serverHeads(t, srv), "clock probes")
}

// Resume's visits waiting for a host's probe end with Resume's context:
// the service's start-up gives up on Resume (its deadline, a shutdown)
// while the probe, a caller's retry of one of the host's operations, is
// still out to a host that never answers. Resume returns at once, before
// the probe's attempt times out, having sent nothing of its own, and the
// operations stay open with only their lost attempt journaled.
func TestResumeWaitingForAProbeEndsWithItsContext(t *testing.T) {
	share := idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	silent := newServer(t, idemtest.WithClock(clock.Now))
	path := filepath.Join(t.TempDir(), "idem.journal")
	keys := lostNumbered(t, silent, clock, path, "silent-", share+1) // the caller's, then Resume's share
	clock.Advance(2 * time.Minute)
	store, network, cut := openBlackholed(t, path, silent)
	var logs syncBuffer
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
		idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	// The caller retries its order: the host's probe.
	retried := make(chan error, 1)
	go func() {
		_, err := c.Submit(t.Context(), idem.Request{Key: keys[0], URL: silent.URL + "/orders", Body: []byte(`{"order":1}`)})
		retried <- err
	}()
	deadline := time.After(idem.DefaultAttemptTimeout / 2)
	for !heldOnce(network) {
		select {
		case <-deadline:
			t.Fatal("the caller's retry was not sent")
		case <-time.After(time.Millisecond):
		}
	}

	cancel, done := resumeCancellable(t, c)
	// Resume's share of visits to the host is under way, none ending:
	// they wait for the probe.
	for !logged(&logs, "a host answers slowly") {
		select {
		case err := <-done:
			t.Fatalf("Resume() returned %v while the probe was out", err)
		case <-network.firstEnded:
			t.Fatal("the probe ended before Resume's visits were seen waiting")
		case <-time.After(time.Millisecond):
		}
	}
	endsWithItsContext(t, cancel, done, network.firstEnded)

	onlyTheProbeSent(t, network, store, keys[1:])
	cut()
	require.Error(t, <-retried)
}

// Resume's own probe ends with Resume's context: the service's start-up
// gives up on Resume (its deadline, a shutdown) while the HEAD asking the
// clock of a host that never answers is out. Resume returns at once, not
// an attempt timeout later, having sent nothing else, and the operations
// stay open with only their lost attempt journaled.
func TestResumeSendingTheClockProbeEndsWithItsContext(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	silent := newServer(t, idemtest.WithClock(clock.Now))
	path := filepath.Join(t.TempDir(), "idem.journal")
	keys := lostNumbered(t, silent, clock, path, "silent-", 4)
	clock.Advance(2 * time.Minute)
	store, network, _ := openBlackholed(t, path, silent)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	cancel, done := resumeCancellable(t, c)
	deadline := time.After(idem.DefaultAttemptTimeout / 2)
	for !heldOnce(network) {
		select {
		case err := <-done:
			t.Fatalf("Resume() returned %v before its probe was sent", err)
		case <-deadline:
			t.Fatal("the probe was not sent")
		case <-time.After(time.Millisecond):
		}
	}
	// The HEAD's end comes with the context too: a bound, not its end,
	// tells a prompt return from one that waited for the probe's attempt.
	late := make(chan struct{})
	time.AfterFunc(idem.DefaultAttemptTimeout/2, func() { close(late) })
	endsWithItsContext(t, cancel, done, late)

	onlyTheProbeSent(t, network, store, keys)
}

// resumeCancellable starts c.Resume on a context cancel ends; done gets
// its error.
func resumeCancellable(t *testing.T, c *idem.Client) (cancel context.CancelFunc, done <-chan error) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ended := make(chan error, 1)
	go func() {
		_, err := c.Resume(ctx)
		ended <- err
	}()
	return cancel, ended
}

// endsWithItsContext cancels Resume's context and checks that Resume,
// reporting to done, ends with it before late is closed.
func endsWithItsContext(t *testing.T, cancel context.CancelFunc, done <-chan error, late <-chan struct{}) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-late:
		t.Fatal("Resume() waited for the probe's attempt after its context ended")
	}
}

// onlyTheProbeSent checks that the one request network got is a HEAD, the
// clock probe, and that keys stay unknown with only their lost attempt.
func onlyTheProbeSent(t *testing.T, network *blackhole, store *journal.Store, keys []string) {
	t.Helper()
	network.mu.Lock()
	arrived, heads, first := network.arrived, network.heads, network.firstMethod
	network.mu.Unlock()
	require.Equal(t, 1, arrived, "requests to the silent host: the probe only")
	require.Equal(t, 1, heads, "clock probes")
	require.Equal(t, http.MethodHead, first, "the probe's method")
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
		require.Lenf(t, rec.Attempts, 1, "attempts of %s: the lost one", k)
	}
}

// heldOnce reports whether b's first request has arrived.
func heldOnce(b *blackhole) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.arrived > 0
}

// logged reports whether buf holds a line with msg in it.
func logged(buf *syncBuffer, msg string) bool {
	buf.mu.Lock()
	defer buf.mu.Unlock()
	return strings.Contains(buf.b.String(), msg)
}

// The HEAD asking a host's clock carries nothing of the operation's: no
// key, no body, none of its journaled headers (an account header such as
// Stripe-Account), not its URL's query string, and the request hook,
// where credentials are added (idem refuses them journaled), never sees
// it: a hook that signs the body of a POST, as AWS SigV4 signers do,
// fails on a request it was never meant for, and the clock needs no
// credentials (a 401's Date teaches as well as a 200's). The resends
// still get all of it.
func TestClockProbeCarriesNoCredentials(t *testing.T) {
	const backlog = 3
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.DefaultKeyRetention))
	path := filepath.Join(t.TempDir(), "idem.journal")
	url := srv.URL + "/orders?expand=customer"
	header := http.Header{"Stripe-Account": {"acct_1"}}
	var keys []string
	{
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock), idem.WithMaxAttempts(1))
		require.NoError(t, err)
		for i := range backlog {
			k := fmt.Sprintf("k%02d", i)
			keys = append(keys, k)
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: k}))
			_, err := c.Submit(t.Context(), idem.Request{Key: k, URL: url, Header: header, Body: []byte(`{"order":1}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, k)
		}
		require.NoError(t, c.Close())
		require.NoError(t, store.Close())
	}
	clock.Advance(10 * time.Minute)

	rec := &recordingTransport{base: srv.Client().Transport}
	var hooked sync.Map // method -> true
	hook := func(r *http.Request) error {
		hooked.Store(r.Method, true)
		if r.Method != http.MethodPost {
			return fmt.Errorf("signer: cannot sign a %s", r.Method)
		}
		r.Header.Set("Authorization", "Bearer sk_live_secret")
		r.Header.Set("X-Signature", "sig")
		return nil
	}
	var logs syncBuffer
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: rec}), idem.WithClock(clock), idem.WithRequestHook(hook),
		idem.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: backlog, Succeeded: backlog}, sum)

	var heads, posts int
	for _, r := range rec.requests() {
		switch r.Method {
		case http.MethodHead:
			heads++
			require.Empty(t, r.URL.RawQuery, "the probe's query string")
			require.Equal(t, "/orders", r.URL.Path, "the probe's path")
			require.Nil(t, r.URL.User, "the probe's user info")
			for _, name := range []string{"Authorization", "Stripe-Account", "X-Signature", idem.DefaultKeyHeader, "Content-Type"} {
				require.Emptyf(t, r.Header.Values(name), "the probe's %s", name)
			}
		case http.MethodPost:
			posts++
			require.Equal(t, "expand=customer", r.URL.RawQuery, "a resend's query string")
			require.Equal(t, "acct_1", r.Header.Get("Stripe-Account"), "a resend's account")
			require.Equal(t, "Bearer sk_live_secret", r.Header.Get("Authorization"), "a resend's Authorization")
			require.Equal(t, "sig", r.Header.Get("X-Signature"), "a resend's signature")
			require.NotEmpty(t, r.Header.Get(idem.DefaultKeyHeader), "a resend's key")
		default:
			t.Fatalf("a %s request", r.Method)
		}
	}
	require.Equal(t, 1, heads, "clock probes")
	require.Equal(t, backlog, posts, "resends")
	_, sawHead := hooked.Load(http.MethodHead)
	require.False(t, sawHead, "the request hook saw the probe")
	require.Equal(t, 1, serverHeads(t, srv), "clock probes the server saw")
	for _, k := range keys {
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
	}
	logs.mu.Lock()
	text := logs.b.String()
	logs.mu.Unlock()
	require.Contains(t, text, "idem: clock probe", "the probe's debug line")
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "clock probe") {
			require.NotContains(t, line, "expand", "the probe's log line")
		}
	}
}

// recordingTransport keeps a copy of each request it passes to base.
type recordingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Clone(req.Context()))
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func (r *recordingTransport) requests() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// staleHeadCache is a shared cache holding a copy of a HEAD's answer, a
// 405 with the Date it came with and the Age since: it answers a HEAD
// from it unless the request carries Cache-Control: no-cache.
type staleHeadCache struct {
	base http.RoundTripper
	date string
	age  time.Duration
	hits atomic.Int64
}

func (s *staleHeadCache) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodHead || strings.Contains(r.Header.Get("Cache-Control"), "no-cache") {
		return s.base.RoundTrip(r)
	}
	s.hits.Add(1)
	h := http.Header{"Date": {s.date}, "Age": {strconv.Itoa(int(s.age.Seconds()))},
		"Cache-Control": {"public, max-age=86400"}, "Allow": {"POST"}}
	return &http.Response{StatusCode: http.StatusMethodNotAllowed, Status: "405 Method Not Allowed",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: http.NoBody, Request: r}, nil
}
