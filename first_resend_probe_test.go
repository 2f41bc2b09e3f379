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
	"strings"
	"sync"
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
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.DefaultKeyRetention))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
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
// judge them by (8 second orders of 40). One resend now goes first; the
// others wait for its answer, whose Date says they are past the window:
// the probe is the only second order, and every other key is flagged
// ReviewClockStepped, never resent.
func TestFirstResendToAHostTeachesItsClockBeforeTheOthers(t *testing.T) {
	for _, run := range []bool{false, true} {
		name := "Resume"
		if run {
			name = "Run"
		}
		t.Run(name, func(t *testing.T) {
			const backlog = 40
			clock, srv, path, keys := stripeBacklog(t, "old", backlog)
			clock.Advance(70 * time.Minute)

			clk := &skewedClock{Clock: clock}
			clk.offset.Store(int64(-time.Hour))
			store, err := journal.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clk))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			if run {
				// Every operation visited: the first pass takes them all.
				runUntil(t, &env{t: t, clock: clock, client: c, ctx: t.Context()}, clock.Now().Add(10*time.Minute))
			} else {
				_, err = c.Resume(t.Context())
				require.NoError(t, err)
			}

			submits := serverSubmits(t, srv)
			var probes []string
			for _, k := range keys {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				if submits[k] == 2 {
					// Sent before any answer from the host came back:
					// judged by our clock alone, as the limit in the docs
					// says.
					probes = append(probes, k)
					require.Equalf(t, 2, srv.Effects("", k), "orders for the probe %s", k)
					require.Equalf(t, idem.StateSucceeded, rec.State, "state of the probe %s", k)
					continue
				}
				require.Equalf(t, 1, submits[k], "submits of %s (the lost one only)", k)
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
				require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
			}
			require.Len(t, probes, 1, "keys resent before the host's clock was learnt")
			require.Len(t, submits, backlog, "keys submitted")
		})
	}
}

// blackhole is a host that accepts connections and never answers (a
// firewall dropping packets, a load balancer with no healthy backend that
// holds the connection): each request to it ends when its attempt times
// out, or, once cut is closed, at once with a reset (the balancer's idle
// reset). The others pass through. It records how many of its requests
// are held at once, and whether any arrived while the first was held.
type blackhole struct {
	base http.RoundTripper
	host string
	cut  chan struct{}

	mu          sync.Mutex
	arrived     int
	held        int
	firstOver   bool
	beside      int            // requests that arrived while the first was held
	peakAfter   int            // most held at once after the first ended
	keys        map[string]int // requests per Idempotency-Key
	firstEnded  chan struct{}
	secondHeld  chan struct{} // closed when two are held at once
	secondClose sync.Once
}

func newBlackhole(base http.RoundTripper, host string) *blackhole {
	return &blackhole{base: base, host: host, cut: make(chan struct{}), keys: map[string]int{},
		firstEnded: make(chan struct{}), secondHeld: make(chan struct{})}
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
	if !first && !b.firstOver {
		b.beside++
	}
	b.held++
	if b.firstOver {
		b.peakAfter = max(b.peakAfter, b.held)
		if b.held >= 2 {
			b.secondClose.Do(func() { close(b.secondHeld) })
		}
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
	b.held--
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
// connections and never answers, must not spend one attempt timeout per
// operation on the probe: the first resend to the host goes alone, and
// once its attempt times out (no Date learnt: nothing to judge by), the
// others go as before the probe existed, at once. Meanwhile another host,
// with a result endpoint, is not held: its operations, asked about and
// resent with the clock their query's answer taught, settle while the
// probe is still out, each executed once. Default settings but the clock:
// the probe's attempt ends by the real attempt timeout.
func TestFirstResendProbeToASilentHostHoldsTheRestOneAttempt(t *testing.T) {
	const backlog = 10
	clock := idemtest.NewClock(epoch)
	silent, healthy := downAndUp(t, clock)
	healthyKeys := []string{"healthy-0", "healthy-1", "healthy-2"}
	path := filepath.Join(t.TempDir(), "idem.journal")
	keys := lostNumbered(t, silent, clock, path, "silent-", backlog)
	laggingOrders(t, healthy, clock, path, healthyKeys...)
	clock.Advance(2 * time.Minute)
	store, network, cut := openBlackholed(t, path, silent)
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
	case <-network.secondHeld:
	case <-time.After(idem.DefaultAttemptTimeout / 2):
		t.Fatal("no two requests to the silent host at once after the probe")
	}
	cut()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(idem.DefaultAttemptTimeout / 2):
		t.Fatal("Resume did not end once the silent host reset its connections")
	}

	network.mu.Lock()
	beside, peak, sent := network.beside, network.peakAfter, maps.Clone(network.keys)
	network.mu.Unlock()
	require.Zero(t, beside, "requests to the silent host sent beside the probe")
	require.Greater(t, peak, 1, "requests to the silent host held at once after the probe")
	healthySubmits := serverSubmits(t, healthy)
	for _, k := range healthyKeys {
		require.Equalf(t, 1, healthy.Effects("", k), "orders for %s", k)
		require.Equalf(t, 2, healthySubmits[k], "submits of %s (the lost one, the resend)", k)
	}
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Truef(t, rec.Open(), "%s settled with its host silent", k)
		require.Equalf(t, 1, silent.Effects("", k), "orders for %s", k)
		require.Positivef(t, sent[k], "resends of %s", k)
		require.Lenf(t, rec.Attempts, 1+sent[k], "attempts journaled for %s (the lost one and each resend)", k)
		delete(sent, k)
	}
	require.Empty(t, sent, "requests to the silent host without one of its keys")
}

// A host whose answers carry no Date (RFC 9110 6.6.1 lets an origin
// without a clock leave it out) has no clock to learn: once the probe's
// answer came without one, the other resends go as they did before the
// probe, each replayed by the server (Stripe-like, inside its window),
// one order each, nothing flagged.
func TestFirstResendProbeWithoutADateChangesNothing(t *testing.T) {
	const backlog = 20
	clock, srv, path, keys := stripeBacklog(t, "k", backlog)
	clock.Advance(10 * time.Minute)

	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	hc := &http.Client{Transport: &dateTransport{base: srv.Client().Transport, date: func() string { return "" }}}
	c, err := idem.New(store, idem.WithHTTPClient(hc), idem.WithClock(clock))
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
		want[k] = 2
	}
	require.Equal(t, want, serverSubmits(t, srv), "submits per key")
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
	silent, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(silent.Close)
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

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Resume(ctx)
		done <- err
	}()
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
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-network.firstEnded:
		t.Fatal("Resume() waited for the probe's attempt after its context ended")
	}

	network.mu.Lock()
	arrived := network.arrived
	network.mu.Unlock()
	require.Equal(t, 1, arrived, "requests to the silent host: the probe only")
	for _, k := range keys[1:] {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
		require.Lenf(t, rec.Attempts, 1, "attempts of %s: the lost one", k)
	}
	cut()
	require.Error(t, <-retried)
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
