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

// passClock is a manual clock on which Run's poll between passes (5 s)
// waits for the test to send on step: each send lets one more pass run,
// and a send that went through means the pass before it is over.
type passClock struct {
	*idemtest.Clock
	step chan struct{}
}

func (c *passClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == 5*time.Second {
		select {
		case <-c.step:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Clock.Sleep(ctx, d)
}

// nextPass waits (at most 10 s) until Run's pass is over and lets the
// next one begin.
func (c *passClock) nextPass(t *testing.T, ran <-chan error) {
	t.Helper()
	select {
	case c.step <- struct{}{}:
	case err := <-ran:
		t.Fatalf("Run() returned %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Run's pass not over after a minute")
	}
}

// hostOf returns the entry of Health for host, if any.
func hostOf(h idem.Health, host string) (idem.HostHealth, bool) {
	for _, hh := range h.Hosts {
		if hh.Host == host {
			return hh, true
		}
	}
	return idem.HostHealth{}, false
}

// An operator must learn from Health that Run cannot reach a host: while
// every operation for it fails, Run is active and its passes are clean.
// Health names the host, since when its visits fail and how many in a
// row, and since when Run takes it for unreachable; once it answers
// again, it is gone from Health, and its backlog settles, each order
// once. Default settings but the clock.
func TestHealthNamesAHostRunCannotReach(t *testing.T) {
	const backlog = 40
	giveUp := 2 * idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	down, up := downAndUp(t, clock)
	store, submit, closeSetup := unconfirmed(t, clock)
	for i := range backlog {
		submit(down, fmt.Sprintf("down-%03d", i))
	}
	submit(up, "up")
	closeSetup()
	clock.Advance(2 * time.Minute) // all due
	start := clock.Now()

	host := strings.TrimPrefix(down.URL, "http://")
	network := &hostDown{base: http.DefaultTransport, host: host}
	clk := &passClock{Clock: clock, step: make(chan struct{})}
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clk))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	require.Empty(t, c.Health().Hosts, "before Run")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := runAsync(ctx, c)

	clk.nextPass(t, ran) // the first pass is over
	h := c.Health()
	require.True(t, h.RunActive)
	require.Zero(t, h.ConsecutiveErrors, "the journal is fine")
	require.Len(t, h.Hosts, 1, "hosts in Health: %+v", h.Hosts)
	hh := h.Hosts[0]
	require.Equal(t, host, hh.Host)
	require.GreaterOrEqual(t, hh.FailedVisits, giveUp)
	require.LessOrEqual(t, hh.FailedVisits, backlog)
	require.Equal(t, start, hh.FailingSince)
	require.Equal(t, start, hh.DownSince)
	require.Equal(t, start, hh.LastFailedVisit)
	require.Zero(t, hh.RestUntil)
	require.Zero(t, h.HostsOmitted)

	// Later passes probe it, one visit a pass at most, once a postponed
	// operation is due again.
	var again idem.HostHealth
	for passes := 1; ; passes++ {
		require.Less(t, passes, 100, "passes with no probe of the down host")
		clk.nextPass(t, ran)
		var ok bool
		again, ok = hostOf(c.Health(), host)
		require.True(t, ok)
		require.LessOrEqual(t, again.FailedVisits, hh.FailedVisits+passes, "failed visits after %d more passes", passes)
		if again.FailedVisits > hh.FailedVisits {
			break
		}
	}
	require.Equal(t, hh.DownSince, again.DownSince, "down since the streak was found, not since the last probe")
	require.Equal(t, hh.FailingSince, again.FailingSince)
	require.True(t, again.LastFailedVisit.After(hh.LastFailedVisit), "the last failed visit is a later pass's probe")

	// Back: once a probe gets an answer the host leaves Health, and every
	// order settles, each executed once.
	network.back.Store(true)
	for i := 0; ; i++ {
		require.Less(t, i, 100, "passes after the host came back; Health() = %+v", c.Health())
		if _, ok := hostOf(c.Health(), host); !ok {
			break
		}
		clk.nextPass(t, ran)
	}
	for i := 0; ; i++ {
		open, err := c.List(t.Context(), idem.Filter{Open: true})
		require.NoError(t, err)
		if len(open) == 0 {
			break
		}
		require.Less(t, i, 100, "passes; %d operations still open", len(open))
		clk.nextPass(t, ran)
	}
	for i := range backlog {
		require.Equal(t, 1, down.Effects("", fmt.Sprintf("down-%03d", i)), "side effects of down-%03d", i)
	}
	require.Equal(t, 1, up.Effects("", "up"))
	require.Empty(t, c.Health().Hosts)
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
}

// A host that answers 503 with Retry-After has asked Run to send it
// nothing for a while: Health says until when, and that is what the
// server asked, however long the operator looks.
func TestHealthSaysUntilWhenAHostRests(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	until := epoch.Add(3*time.Minute + time.Hour)
	srv := newOrderAPI(t, clock, throttling(http.StatusServiceUnavailable, until))
	host := strings.TrimPrefix(srv.srv.URL, "http://")

	// Orders taken while the server was down: never sent.
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	network := &downTransport{clock: clock, up: epoch.Add(time.Hour * 24 * 365)}
	setup, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock), idem.WithMaxAttempts(1))
	require.NoError(t, err)
	for i := range 3 {
		_, err := setup.Submit(t.Context(), idem.Request{Key: fmt.Sprintf("k%d", i), URL: srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	}
	require.NoError(t, setup.Close())
	clock.Advance(3 * time.Minute) // all due; the server is up and answers 503 for an hour

	clk := &passClock{Clock: clock, step: make(chan struct{})}
	c, err := idem.New(store, idem.WithHTTPClient(srv.srv.Client()), idem.WithClock(clk))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := runAsync(ctx, c)
	clk.nextPass(t, ran)
	hh, ok := hostOf(c.Health(), host)
	require.True(t, ok, "Health() = %+v", c.Health())
	// throttling rounds its Retry-After up to the next whole second.
	require.False(t, hh.RestUntil.Before(until), "rest until %v; want %v", hh.RestUntil, until)
	require.False(t, hh.RestUntil.After(until.Add(time.Second)), "rest until %v; want %v", hh.RestUntil, until)
	require.GreaterOrEqual(t, hh.FailedVisits, 1, "a 503 is no answer")
	require.Zero(t, hh.DownSince, "a host that asks for rest is not unreachable")
	refused := srv.received()

	// The next passes (5 s each) send it nothing and keep saying so.
	clk.nextPass(t, ran)
	clk.nextPass(t, ran)
	again, ok := hostOf(c.Health(), host)
	require.True(t, ok)
	require.Equal(t, hh.RestUntil, again.RestUntil)
	require.Equal(t, refused, srv.received(), "submits sent during the rest")
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
}
