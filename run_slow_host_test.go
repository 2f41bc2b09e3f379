package idem_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A host that answers, but slowly, must not hold every one of Run's
// workers for as long as its backlog lasts. Payment APIs may take many
// seconds to answer (Klarna's hold a request up to their 59 s idle
// timeout, then answer 500 TIMEOUT: docs.klarna.com, "Request Timeout";
// Adyen's API library waits 30 s by default): a host whose every answer
// comes within the attempt timeout, but late, is neither silent nor
// throttling, so host health never hands it off. Here its requests are
// held until the end, well within the attempt timeout. Run lets one
// host hold at most WithResumeConcurrency of its workers, and once that host's visits stall
// it pushes the host's waiting operations back and goes on claiming: the
// healthy server's operations, due after a backlog longer than one claim,
// settle while every request to the slow host is still held, be they one
// or a backlog of their own, longer than what one claim after the stall
// takes; and once the slow host answers, its whole backlog settles, each
// executed once. Default settings but the clock.
func TestRunSlowHostLeavesTheOthersTheirWorkers(t *testing.T) {
	for _, healthyOps := range []int{1, 300} {
		t.Run(fmt.Sprintf("%d healthy", healthyOps), func(t *testing.T) {
			const backlog = 300 // more than one pass's claim
			share := idem.DefaultResumeConcurrency
			clock := idemtest.NewClock(epoch)
			slow, healthy := downAndUp(t, clock)
			healthyKeys := make([]string, healthyOps)
			for i := range healthyKeys {
				healthyKeys[i] = fmt.Sprintf("healthy-%03d", i)
			}
			store := backlogThen(t, clock, slow, "slow", backlog, healthy, healthyKeys...)

			start := clock.Now()
			c, network, settled, ran := runHeld(t, clock, store, slow, backlog+healthyOps)
			keys := map[string]bool{}
			waitSettled := func(n int, within time.Duration) {
				t.Helper()
				settledOnce(t, settled, ran, keys, n, within, network)
			}

			// Well within the attempt timeout, which would end the held
			// requests.
			waitSettled(healthyOps, idem.DefaultAttemptTimeout*3/4)
			for _, key := range healthyKeys {
				require.True(t, keys[key], "%s settled first", key)
				require.Equal(t, 1, healthy.Effects("", key), "side effects of %s", key)
			}
			require.Equal(t, 2*healthyOps+1, healthy.Stats().Requests, "the healthy server's requests: each key's lost one, then Run's HEAD and resends")
			require.Equal(t, 1, serverHeads(t, healthy), "clock probes to the healthy server")
			require.Zero(t, network.ended.Load(), "requests to the slow host that ended before the healthy operations settled")
			// The first of Run's visits to the slow host asks its clock
			// with a HEAD (no answer of the host's has taught it): the
			// others wait for its answer, holding the host's share of
			// workers.
			require.Equal(t, int64(1), network.peak.Load(), "requests held at once by the slow host")
			require.Equal(t, backlog, slow.Stats().Requests, "the slow server's requests: each key's lost one, none from Run yet")
			// An operator sees why the slow host's operations lag, while
			// they do: it answers, so it is neither failing nor down.
			h := c.Health()
			hh, ok := hostOf(h, network.host)
			require.True(t, ok, "Health() lists the slow host while its requests are held: %+v", h.Hosts)
			require.Equal(t, idem.HostHealth{Host: network.host, SlowSince: start}, hh)

			// The slow host answers: its backlog settles, nothing lost,
			// nothing executed twice, and it never held more than its
			// share.
			close(network.release)
			waitSettled(healthyOps+backlog, 30*time.Second)
			for i := range backlog {
				key := fmt.Sprintf("slow-%03d", i)
				require.True(t, keys[key], "%s settled", key)
				require.Equal(t, 1, slow.Effects("", key), "side effects of %s", key)
			}
			require.Equal(t, 2*backlog+1, slow.Stats().Requests, "the slow server's requests: each key's lost one, then Run's HEAD and resends")
			require.Equal(t, 1, serverHeads(t, slow), "clock probes to the slow server")
			require.Equal(t, 2*healthyOps+1, healthy.Stats().Requests, "the healthy server's requests")
			require.Zero(t, network.ended.Load(), "held requests that timed out")
			require.LessOrEqual(t, network.peak.Load(), int64(share), "requests held at once by the slow host")
			open, err := c.List(t.Context(), idem.Filter{Open: true})
			require.NoError(t, err)
			require.Empty(t, open, "operations still open")
			waitHealth(t, c, ran, "the slow host, answering at once, no longer listed", func(h idem.Health) bool {
				_, ok := hostOf(h, network.host)
				return !ok
			})
		})
	}
}

// runHeld starts Run, with default settings but clock, on store, its
// requests to slow held until network.release is closed; settled gets
// the key of each of up to ops settlements. The client is closed with
// the test.
func runHeld(t *testing.T, clock *idemtest.Clock, store *journal.Store, slow *idemtest.Server, ops int) (c *idem.Client, network *heldHost, settled <-chan string, ran <-chan error) {
	t.Helper()
	network = &heldHost{base: http.DefaultTransport, host: strings.TrimPrefix(slow.URL, "http://"), release: make(chan struct{})}
	keys := make(chan string, ops)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
		idem.WithSettleFunc(func(r *idem.Result) { keys <- r.Key }))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, network, keys, runAsync(t.Context(), c)
}

// settledOnce adds to keys the operations settled, until there are n,
// each settled once; it fails the test if Run returns first, or if within
// passes while held still holds the slow host's requests.
func settledOnce(t *testing.T, settled <-chan string, ran <-chan error, keys map[string]bool, n int, within time.Duration, held *heldHost) {
	t.Helper()
	timeout := time.After(within)
	for len(keys) < n {
		select {
		case k := <-settled:
			require.False(t, keys[k], "%s settled twice", k)
			keys[k] = true
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-timeout:
			t.Fatalf("%d of %d operations settled after %v (%d requests to the slow host held, %d ended)", len(keys), n, within, held.held.Load(), held.ended.Load())
		}
	}
}

// heldHost holds every request to one host until release is closed, as a
// server that takes its time to answer does, and passes the rest through.
// A request whose context ends first (the attempt timeout) counts in
// ended.
type heldHost struct {
	base    http.RoundTripper
	host    string
	release chan struct{}
	held    atomic.Int64 // held now
	peak    atomic.Int64 // most held at once
	ended   atomic.Int64
}

func (h *heldHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != h.host {
		return h.base.RoundTrip(r)
	}
	n := h.held.Add(1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	defer h.held.Add(-1)
	select {
	case <-h.release:
		return h.base.RoundTrip(r)
	case <-r.Context().Done():
		h.ended.Add(1)
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, r.Context().Err()
	}
}

// Health lists a slow host while its operations wait at its pace, not
// for ever after the pass that settled the last of them. An acquirer
// held each request for seconds, within the attempt timeout (Klarna's
// hold one up to their 59 s idle timeout: docs.klarna.com, "Request
// Timeout"), while as many operations of it as its share were due: Run
// took it for slow, and every one of them settled in that pass, none
// pushed back. Nothing of the host was due after that, so no pass of
// Run visited it again (the service's calls to it settle in Do): it
// stayed listed, SlowSince hours back, an alert on the payment API
// (README) that rang until Run restarted. Default settings but the
// clock.
func TestRunSlowHostUnlistedOnceNothingOfItWaits(t *testing.T) {
	share := idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	slow, healthy := downAndUp(t, clock)
	store := backlogThen(t, clock, slow, "slow", share, healthy)

	start := clock.Now()
	c, network, settled, ran := runHeld(t, clock, store, slow, share)

	h := waitHealth(t, c, ran, "the slow host listed while it holds its share", func(h idem.Health) bool {
		_, ok := hostOf(h, network.host)
		return ok
	})
	hh, _ := hostOf(h, network.host)
	require.Equal(t, idem.HostHealth{Host: network.host, SlowSince: start}, hh)
	require.Equal(t, int64(1), network.held.Load(), "requests held by the slow host: its probe, a HEAD, the others waiting for it")

	close(network.release)
	keys := map[string]bool{}
	settledOnce(t, settled, ran, keys, share, 30*time.Second, network)
	waitHealth(t, c, ran, "the slow host, nothing of it waiting, no longer listed", func(h idem.Health) bool {
		_, ok := hostOf(h, network.host)
		return !ok
	})
	for i := range share {
		key := fmt.Sprintf("slow-%03d", i)
		require.True(t, keys[key], "%s settled", key)
		require.Equal(t, 1, slow.Effects("", key), "side effects of %s", key)
	}
	require.Equal(t, 2*share+1, slow.Stats().Requests, "the slow server's requests: each key's lost one, then Run's HEAD and resends")
	require.Equal(t, 1, serverHeads(t, slow), "clock probes to the slow server")
	require.Zero(t, network.ended.Load(), "held requests that timed out")
	require.LessOrEqual(t, network.peak.Load(), int64(share), "requests held at once by the slow host")
}

// A host that takes requests and never answers them is failing, not
// slow. A load balancer in front of a dead backend holds each request
// until its idle timeout (AWS's Application Load Balancer: 60 s, then
// 504), longer than the attempt timeout: Run's visits hold the host's
// whole share, and it is taken for slow before any of them ends (nothing
// tells the two apart until then). Once they end with no answer, Health
// listed it as both failing and slow, a slow host being one that
// "answers in the end" (HostHealth.SlowSince), and an operator looking
// for an outage read a slow acquirer. Default settings but the clock.
// Its first visit asks the host's clock with a HEAD, alone for an
// attempt timeout: the others wait for it, holding the host's share, and
// once it times out each visit ends unsent, with no answer from the host.
func TestRunSilentHostIsFailingNotSlow(t *testing.T) {
	share := idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	silent, healthy := downAndUp(t, clock)
	store := backlogThen(t, clock, silent, "silent", 2*share, healthy)
	c, network, _, ran := runHeld(t, clock, store, silent, 2*share) // never released

	waitHealth(t, c, ran, "the silent host taken for slow while it holds its share", func(h idem.Health) bool {
		hh, ok := hostOf(h, network.host)
		return ok && !hh.SlowSince.IsZero()
	})
	require.Equal(t, int64(1), network.held.Load(), "requests held by the silent host: its probe, a HEAD, the others waiting for it")
	deadline := time.After(3 * idem.DefaultAttemptTimeout)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	var hh idem.HostHealth
	for hh.FailedVisits < share {
		select {
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-deadline:
			t.Fatalf("Health() lists %+v for the silent host, %d of its requests ended", hh, network.ended.Load())
		case <-poll.C:
		}
		hh, _ = hostOf(c.Health(), network.host)
	}
	require.Equal(t, share, hh.FailedVisits, "visits that got no answer")
	require.False(t, hh.FailingSince.IsZero(), "FailingSince")
	require.True(t, hh.SlowSince.IsZero(), "SlowSince of a host that never answered: %v", hh.SlowSince)
	// The HEAD alone (no answer of the host's has taught its clock);
	// once its attempt timed out, no visit resends (the host may be only
	// slow, and take each resend on a clock nothing taught), each ends
	// with no answer from the host.
	require.Equal(t, int64(1), network.ended.Load(), "requests the attempt timeout ended: the HEAD")
	require.Equal(t, int64(1), network.peak.Load(), "requests held at once by the silent host")
	require.Equal(t, 2*share, silent.Stats().Requests, "the silent server's requests: each key's lost one (Run's held never reach it)")
	require.Zero(t, healthy.Stats().Requests, "requests to the other server")
}
