package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// refusedByPass refuses the connections to the hosts it names (those
// it names true answer 429 with a Retry-After instead) and counts the
// requests to each by the time on clock when they were sent: Run's clock
// moves only between its passes, so the counts are per pass.
type refusedByPass struct {
	base  http.RoundTripper
	clock *idemtest.Clock
	hosts map[string]bool // host → throttled
	mu    sync.Mutex
	sent  map[string]map[time.Time]int // host → pass → requests
}

func (f *refusedByPass) RoundTrip(r *http.Request) (*http.Response, error) {
	throttled, ok := f.hosts[r.URL.Host]
	if !ok {
		return f.base.RoundTrip(r)
	}
	f.mu.Lock()
	if f.sent == nil {
		f.sent = map[string]map[time.Time]int{}
	}
	if f.sent[r.URL.Host] == nil {
		f.sent[r.URL.Host] = map[time.Time]int{}
	}
	f.sent[r.URL.Host][f.clock.Now()]++
	f.mu.Unlock()
	if throttled {
		// RFC 6585 section 4: too many requests, and how long to wait.
		resp := frontPage(r, http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}, `{"error":"rate limited"}`)
		resp.Header.Set("Content-Type", "application/json")
		return resp, nil
	}
	return refuseDial.RoundTrip(r)
}

// after returns, for host, the requests of each pass after at. Those at
// at itself are left out: the pass that took the host for down, Run's
// clock still reading at, sent them before it slept.
func (f *refusedByPass) after(host string, at time.Time) map[time.Duration]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[time.Duration]int{}
	for t, n := range f.sent[host] {
		if t.After(at) {
			out[t.Sub(at)] = n
		}
	}
	return out
}

// A down host's probe whose visit only asked the operation's result
// endpoint, on another host that is down too (the query refused, the
// visit handed off unsent), still counts as the host's probe: were it
// taken for a visit that made no exchange (c3c46be), the next operation
// would probe, and the next, each asking the silent endpoint in turn, so
// that much of the host's backlog was visited on every pass, not one of
// it (8 queries a pass here before b3ae61c). So does one whose endpoint
// asked it to wait (429 with Retry-After: RFC 6585 section 4): the next
// would be asked to wait as well. Orders to an API whose result
// endpoint has a host of its own (WithResultEndpoint, a read service
// behind its own load balancer), its orders' host refusing connections.
// Default settings but the clock and a result endpoint.
func TestRunProbeThatOnlyAskedADownResultEndpointCounts(t *testing.T) {
	for _, throttled := range []bool{false, true} {
		t.Run(fmt.Sprintf("throttled=%t", throttled), func(t *testing.T) { runProbeThatOnlyAskedAResultEndpoint(t, throttled) })
	}
}

func runProbeThatOnlyAskedAResultEndpoint(t *testing.T, throttled bool) {
	const maybeSent = 250
	giveUp := 2 * idem.DefaultResumeConcurrency
	neverSent := giveUp + idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now))
	results := newServer(t, idemtest.WithClock(clock.Now))
	orderHost, resultHost := strings.TrimPrefix(srv.URL, "http://"), strings.TrimPrefix(results.URL, "http://")
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	// The set-up: "p-" orders never sent (their connections refused),
	// due first: their visits send to the orders' host, and take it for
	// down. "q-" orders executed, their answers lost: a visit asks the
	// result endpoint first.
	lossy := &outage{base: http.DefaultTransport}
	lossy.mode.Store(netLossy)
	endpoint := idem.WithResultEndpoint(results.URL + "/operations/{key}")
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: &refusing{base: lossy, prefix: "p-"}}),
		idem.WithClock(clock), endpoint, idem.WithMaxAttempts(1))
	require.NoError(t, err)
	var never, maybe []string
	for i := range neverSent {
		never = append(never, fmt.Sprintf("p-%02d", i))
	}
	for i := range maybeSent {
		maybe = append(maybe, fmt.Sprintf("q-%02d", i))
	}
	for _, key := range append(never, maybe...) {
		_, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
	}
	require.NoError(t, c.Close())
	setDue := func(key string, due time.Time) {
		_, err := store.Update(t.Context(), idem.DefaultScope, key, func(r *journal.Record) error { r.NextDue = due; return nil })
		require.NoError(t, err)
	}
	for _, key := range maybe {
		setDue(key, clock.Now().Add(time.Hour)) // not before the host is down
	}

	network := &refusedByPass{base: http.DefaultTransport, clock: clock, hosts: map[string]bool{orderHost: false, resultHost: throttled}}
	c, err = idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock), endpoint)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := runAsync(ctx, c)
	waitHealth(t, c, ran, "the orders' host taken for down", func(h idem.Health) bool {
		for _, hs := range h.Hosts {
			if hs.Host == orderHost && !hs.DownSince.IsZero() {
				return true
			}
		}
		return false
	})
	held, release := clock.HoldFrom(clock.Now())
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("Run never slept after taking the host for down")
	}
	from := clock.Now()
	for i, key := range maybe {
		setDue(key, from.Add(time.Duration(i-maybeSent)*time.Millisecond))
	}
	end := from.Add(5 * time.Minute)
	held, release2 := clock.HoldFrom(end)
	release()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatalf("Run's clock %v short of %v after a minute", clock.Now().Sub(from), end.Sub(from))
	}
	queries, sends := network.after(resultHost, from), network.after(orderHost, from)
	release2()
	cancel()
	require.ErrorIs(t, <-ran, context.Canceled)

	t.Logf("by pass: queries to the result endpoint %v, requests to the orders' host %v", queries, sends)
	for at, n := range queries {
		require.LessOrEqual(t, n, 1, "queries to the result endpoint on the pass at %v (all: %v)", at, queries)
	}
	for at, n := range sends {
		require.LessOrEqual(t, n, 1, "requests to the down orders' host on the pass at %v (all: %v)", at, sends)
	}
	for _, key := range maybe {
		require.Equal(t, 1, srv.Effects("", key), "orders of %s", key)
	}
	for _, key := range never {
		require.Zero(t, srv.Effects("", key), "orders of %s", key)
	}
}
