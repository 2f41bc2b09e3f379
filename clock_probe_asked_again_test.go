package idem_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// probeEndClock is steppedBackHour's clock, an hour behind, that runs
// atEnd at its third reading once armed: the timed-out probe's end, the
// time from which the host may be asked again, then the look its sender
// takes at the host's silence (awaitProbe, unasked), before which atEnd
// lets another call ask the host again.
type probeEndClock struct {
	*skewedClock
	armed atomic.Bool
	reads atomic.Int32
	atEnd func()
}

func (c *probeEndClock) Now() time.Time {
	if c.armed.Load() && c.reads.Add(1) == 3 {
		c.atEnd()
	}
	return c.skewedClock.Now()
}

// askedAgainHost is a host whose first HEAD, to the orders path, never
// answers (a listing slower than the attempt timeout, slowListing); its
// end arms clock. The second, to its root, is answered by the server once
// a POST for held has come, or times out: the host is slow, not gone.
type askedAgainHost struct {
	base  http.RoundTripper
	clock *probeEndClock
	held  string

	heads      atomic.Int32
	secondHead chan struct{}
	posted     chan struct{}
	postOnce   sync.Once
}

func (h *askedAgainHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodHead {
		if r.Header.Get(idem.DefaultKeyHeader) == h.held {
			h.postOnce.Do(func() { close(h.posted) })
		}
		return h.base.RoundTrip(r)
	}
	if h.heads.Add(1) == 1 {
		<-r.Context().Done()
		h.clock.armed.Store(true)
		return nil, r.Context().Err()
	}
	close(h.secondHead)
	select {
	case <-h.posted:
		return h.base.RoundTrip(r)
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) resubmits (Submit) two orders an earlier process sent, whose
// answers were lost. The server is Stripe-like: "You can remove keys from
// the system automatically after they're at least 24 hours old. We
// generate a new request if a key is reused after the original is
// pruned" (docs.stripe.com/idempotency; the fake keeps them the default
// window, 20 minutes), and it forgot both 50 minutes ago by its own clock
// (RFC 9110 6.6.1's Date). The first call's HEAD asking the host's clock
// times out; the second, its turn come an attempt timeout on, asks the
// host again (its root) between the first's end and its look at the
// host's silence. The new probe had taken the timeout's mark off the
// host: the first took the host for silent no more and sent its resend on
// our clock alone, a second order on a forgotten key (2 for old00), while
// the probe that would have judged it was still out. A resend whose probe
// timed out waits for the host's next probe, asked by another call or by
// itself. Default settings but the clock.
func TestClockProbeTimedOutHoldsItsResendWhileTheHostIsAskedAgain(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	clock, srv, path, keys := stripeBacklog(t, "old", 2)
	clock.Advance(70 * time.Minute)
	clk := &probeEndClock{skewedClock: &skewedClock{Clock: clock}}
	clk.offset.Store(int64(-time.Hour))
	network := &askedAgainHost{base: srv.Client().Transport, clock: clk, held: keys[0],
		secondHead: make(chan struct{}), posted: make(chan struct{})}
	store, c := openOn(t, path, network, clk)
	order := func(k string) idem.Request {
		return idem.Request{Key: k, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)}
	}

	second := make(chan error, 1)
	clk.atEnd = func() {
		clock.Advance(idem.DefaultAttemptTimeout)
		go func() {
			_, err := c.Submit(t.Context(), order(keys[1]))
			second <- err
		}()
		// Bounded: a change in the clock's readings that fires this at
		// another moment must fail the test, not hang it.
		select {
		case <-network.secondHead:
		case <-time.After(3 * idem.DefaultAttemptTimeout):
		}
	}
	_, first := c.Submit(t.Context(), order(keys[0]))
	var asked error
	select {
	case asked = <-second:
	case <-time.After(3 * idem.DefaultAttemptTimeout):
		t.Fatal("the second call did not end")
	}

	require.EqualValues(t, 2, network.heads.Load(), "clock probes: the path's, the root's")
	requireHeldUnknown(t, srv, store, keys)
	// Both handed off (errHostSilent): the host's root timed out too.
	require.ErrorIs(t, first, idem.ErrUnknownOutcome, "the resend behind the timed-out probe")
	require.ErrorIs(t, asked, idem.ErrUnknownOutcome, "the resend that asked again")
}

// deafHead is a host whose first HEAD, to the orders path, is held by a
// Transport that does not look at its context (a caller's, a proxy's
// that hangs on a half-open connection) until release is closed, and is
// then passed on, its attempt timeout long over; held is closed when it
// arrives.
type deafHead struct {
	base    http.RoundTripper
	heads   atomic.Int32
	held    chan struct{}
	release chan struct{}
}

func (h *deafHead) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodHead && h.heads.Add(1) == 1 {
		close(h.held)
		<-h.release
	}
	return h.base.RoundTrip(r)
}

// As above, two resubmitted orders the server forgot 50 minutes ago by
// its clock, ours an hour behind. The first call's HEAD asking the
// host's clock outlasts its attempt timeout: the Transport does not end
// it. The second call, behind it, waits out its bound (two attempt
// timeouts) and took the probe for over: it went on our clock alone, a
// second order on a forgotten key (2 for old01), while the probe that
// would have judged it was still out. It now takes the host for silent,
// as after a probe that timed out, and is handed off, as the first is
// once its HEAD ends, timed out. Default settings but the clock.
func TestClockProbeOutlastingItsBoundHoldsTheResendBehindIt(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	clock, srv, path, keys := stripeBacklog(t, "old", 2)
	clock.Advance(70 * time.Minute)
	clk := &skewedClock{Clock: clock}
	clk.offset.Store(int64(-time.Hour))
	network := &deafHead{base: srv.Client().Transport, held: make(chan struct{}), release: make(chan struct{})}
	releaseOnce := sync.OnceFunc(func() { close(network.release) })
	t.Cleanup(releaseOnce)
	store, c := openOn(t, path, network, clk)
	order := func(k string) idem.Request {
		return idem.Request{Key: k, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)}
	}

	first := make(chan error, 1)
	go func() {
		_, err := c.Submit(t.Context(), order(keys[0]))
		first <- err
	}()
	select {
	case <-network.held:
	case <-time.After(3 * idem.DefaultAttemptTimeout):
		t.Fatal("no clock probe was sent")
	}
	_, behind := c.Submit(t.Context(), order(keys[1]))
	releaseOnce()
	probing := <-first

	require.EqualValues(t, 1, network.heads.Load(), "clock probes: the one held")
	requireHeldUnknown(t, srv, store, keys)
	require.ErrorIs(t, behind, idem.ErrUnknownOutcome, "the resend behind the held probe: handed off")
	require.ErrorIs(t, probing, idem.ErrUnknownOutcome, "the probing resend: handed off")
}

// openOn opens the journal at path and a client on it whose requests go
// through rt and whose clock is clk, both closed with the test.
func openOn(t *testing.T, path string, rt http.RoundTripper, clk idem.Clock) (*journal.Store, *idem.Client) {
	t.Helper()
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: rt}), idem.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return store, c
}

// requireHeldUnknown fails unless each of keys, a lost order, is one
// order on srv, its lost submit the only one, and unknown in store with
// that attempt alone: no resend went.
func requireHeldUnknown(t *testing.T, srv *idemtest.Server, store *journal.Store, keys []string) {
	t.Helper()
	lost := map[string]int{}
	for _, k := range keys {
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
		require.Lenf(t, rec.Attempts, 1, "attempts of %s: the lost one", k)
		lost[k] = 1
	}
	require.Equal(t, lost, serverSubmits(t, srv), "submits per key: the lost one, no resend")
}
