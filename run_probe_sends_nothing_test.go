package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A host Run took for unreachable is probed with one of its due
// operations a pass; a probe whose visit makes no exchange of its own
// (its key window over, and no result endpoint: flagged for a person,
// nothing sent) tells nothing of the host. Taken for a probe, it left the host down
// after the server was back, and the operations due with it were pushed
// back by as long as the outage had lasted (up to an hour): an order
// sent two minutes before, whose key the server still kept, came due
// past its key window and was flagged for a person instead of resent
// and confirmed. A Stripe-like API (no result endpoint; keys kept at
// least 24 h: docs.stripe.com/api/idempotent_requests; idem's default
// window 20 min) down for an hour. Default settings but the clock.
func TestRunProbeThatSendsNothingDoesNotKeepAHostDown(t *testing.T) {
	giveUp := 2 * idem.DefaultResumeConcurrency
	start := epoch
	o := newOutageJournal(t, start)
	srv, store := o.srv, o.store

	// The set-up: every order executed, its answer lost. A process before
	// this one sent the "a-" orders and "x" a minute before Run starts;
	// "n" is sent 58 minutes into the outage, its answer lost as well.
	submitAt := func(at time.Time, keys ...string) { o.submitAt(t, at, nil, nil, keys...) }
	early := numberedKeys("a-%02d", giveUp)
	submitAt(start.Add(-time.Minute), append(early, "x")...)
	back := start.Add(time.Hour)
	submitAt(back.Add(-2*time.Minute), "n")
	// Neither is due before the host is back (then both are: setDue).
	o.setDue(t, "x", back)
	o.setDue(t, "n", back)

	// Run finds the host down on its first pass (the "a-" visits, all
	// refused), and the host is back just before x and n come due; x,
	// long past its key window, is the host's probe.
	o.runThroughOutage(t, start, back)

	sends := func(key string) int { return postsOf(t, srv, key) }
	require.Equal(t, 2, sends("n"), "sends of n, the key n on each: the lost one and the resend replayed")
	for _, key := range append(early, "x") {
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, idem.ReviewKeyExpired, rec.Review, key)
		require.Equal(t, 1, srv.Effects("", key), "orders of %s", key)
		require.Equal(t, 1, sends(key), "sends of %s reaching the server", key)
	}
}

// outageJournal is a server and a journal (both closed with the test) on
// a clock, for the tests of how Run probes a host it took for down.
type outageJournal struct {
	clock *idemtest.Clock
	srv   *idemtest.Server
	store *journal.Store
}

func newOutageJournal(t *testing.T, start time.Time) *outageJournal {
	t.Helper()
	clock := idemtest.NewClock(start)
	srv := newServer(t, idemtest.WithClock(clock.Now))
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	return &outageJournal{clock: clock, srv: srv, store: store}
}

// submitAt journals orders to srv, one a key, sent at `at` through rt
// with one attempt each, which must end unknown; a nil rt executes them
// and loses their answers. resultURL, if not nil, names each one's
// result endpoint.
func (o *outageJournal) submitAt(t *testing.T, at time.Time, rt http.RoundTripper, resultURL func(key string) string, keys ...string) {
	t.Helper()
	if rt == nil {
		lossy := &outage{base: http.DefaultTransport}
		lossy.mode.Store(netLossy)
		rt = lossy
	}
	c, err := idem.New(o.store, idem.WithHTTPClient(&http.Client{Transport: rt}), idem.WithClock(idemtest.NewClock(at)),
		idem.WithMaxAttempts(1))
	require.NoError(t, err)
	for _, key := range keys {
		req := idem.Request{Key: key, URL: o.srv.URL + "/orders", Body: []byte(`{"order":1}`)}
		if resultURL != nil {
			req.ResultURL = resultURL(key)
		}
		_, err := c.Submit(t.Context(), req)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
	}
	require.NoError(t, c.Close())
}

// submitOldAndRecent journals old orders ("a000"…) sent 30 minutes
// before start and recent ones ("b000"…) a minute before, each executed
// and its answer lost, resultURL naming each one's result endpoint.
func (o *outageJournal) submitOldAndRecent(t *testing.T, start time.Time, resultURL func(key string) string, old, recent int) (oldKeys, newKeys []string) {
	t.Helper()
	oldKeys, newKeys = numberedKeys("a%03d", old), numberedKeys("b%03d", recent)
	o.submitAt(t, start.Add(-30*time.Minute), nil, resultURL, oldKeys...)
	o.submitAt(t, start.Add(-time.Minute), nil, resultURL, newKeys...)
	return oldKeys, newKeys
}

// numberedKeys are n keys, the i-th format's of i.
func numberedKeys(format string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(format, i)
	}
	return keys
}

// setDue makes key due at due.
func (o *outageJournal) setDue(t *testing.T, key string, due time.Time) {
	t.Helper()
	_, err := o.store.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error { r.NextDue = due; return nil })
	require.NoError(t, err)
}

// run starts Run on a client of the journal sending through rt, on the
// journal's clock, the client closed when the test ends; stop cancels
// Run and requires that it returned for that.
func (o *outageJournal) run(t *testing.T, rt http.RoundTripper, opts ...idem.Option) (c *idem.Client, stop func()) {
	t.Helper()
	c, err := idem.New(o.store, append([]idem.Option{idem.WithHTTPClient(&http.Client{Transport: rt}), idem.WithClock(o.clock)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ran := runAsync(ctx, c)
	return c, func() {
		t.Helper()
		cancel()
		require.ErrorIs(t, <-ran, context.Canceled)
	}
}

// runThroughOutage runs Run, the orders' host refusing every connection,
// from start to three hours after back. A minute before back Run has
// taken the host for down; then the host is back, and x comes due just
// before n, in the same pass: the pass that takes x for the host's
// probe. n, sent two minutes before back, must be resent and confirmed
// then, never flagged: one order.
func (o *outageJournal) runThroughOutage(t *testing.T, start, back time.Time) {
	t.Helper()
	network := &hostDown{base: http.DefaultTransport, host: strings.TrimPrefix(o.srv.URL, "http://")}
	c, stop := o.run(t, network)
	o.runTo(t, start, back.Add(-time.Minute), func() {
		require.Positive(t, network.refused.Load(), "requests refused during the outage")
		hosts := c.Health().Hosts
		require.Len(t, hosts, 1)
		require.False(t, hosts[0].DownSince.IsZero(), "the host taken for down: %+v", hosts[0])
		network.back.Store(true)
		now := o.clock.Now()
		o.setDue(t, "x", now.Add(-time.Millisecond))
		o.setDue(t, "n", now)
	})
	o.runTo(t, start, back.Add(3*time.Hour), func() {})
	stop()

	rec, err := o.store.Get(t.Context(), idem.DefaultScope, "n")
	require.NoError(t, err)
	require.Equal(t, "", rec.Review, "n, sent 2 minutes before the host was back: flagged %v after it", rec.Attempts)
	require.Equal(t, journal.StateSucceeded, rec.State, "n")
	require.Equal(t, 1, o.srv.Effects("", "n"), "orders of n")
}

// runTo lets Run run until the clock reads end, then, while Run is held
// there, calls then; start is where the clock began, for the message.
func (o *outageJournal) runTo(t *testing.T, start, end time.Time, then func()) {
	t.Helper()
	held, release := o.clock.HoldFrom(end)
	defer release()
	select {
	case <-held:
	case <-time.After(5 * time.Minute):
		t.Fatalf("Run's clock %v short of %v after 5 minutes", o.clock.Now().Sub(start), end.Sub(start))
	}
	then()
}
