package idem_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// slowListing is an order API whose HEAD on the submit path runs the
// path's GET handler, a listing slower than the attempt timeout, while
// its POSTs answer at once: Rails routes HEAD to the GET action, Django's
// View serves HEAD with get(), Flask/Werkzeug add HEAD to every GET rule
// (the body is dropped, the work is done), and GET /orders lists every
// order. Other paths answer as the server does.
type slowListing struct {
	base http.RoundTripper

	mu    sync.Mutex
	heads []string // the path of each HEAD, in order
}

func (s *slowListing) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodHead {
		s.mu.Lock()
		s.heads = append(s.heads, r.URL.Path)
		s.mu.Unlock()
		if r.URL.Path == "/orders" {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}
	}
	return s.base.RoundTrip(r)
}

// A process restarted ten seconds after its orders' answers were lost,
// its clock right, calls Resume at start-up and then runs Run, with no new
// order to the host. The server is Stripe-like (it replays a key within
// its window and sends Date on every answer, RFC 9110 6.6.1), with no
// result endpoint; its HEAD on /orders runs the slow listing (slowListing)
// and times out every time. The resends waited for a HEAD to the same
// path again and again, handed off unknown each time, until the key window
// passed by our clock and each order was left to a person as "key
// expired", though a resend would have been replayed. A probe that timed
// out on the path is followed by one to the host's root, which no handler
// of the path serves: its Date teaches the clock, every key is resent and
// replayed, none ordered twice. Default settings but the clock.
func TestClockProbeSlowOnThePathAsksTheHostRoot(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	clock, srv, path, keys := stripeBacklog(t, "list", 3)
	clock.Advance(10 * time.Second)
	network := &slowListing{base: srv.Client().Transport}
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	runUntil(t, &env{t: t, clock: clock, client: c, ctx: t.Context()}, clock.Now().Add(30*time.Second))

	resent := map[string]int{}
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateSucceeded, rec.State, "state of %s", k)
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		resent[k] = 2
	}
	require.Equal(t, resent, serverSubmits(t, srv), "submits per key: the lost one, the replayed resend")
	network.mu.Lock()
	defer network.mu.Unlock()
	require.Equal(t, []string{"/orders", "/"}, network.heads, "clock probes: the path's, timed out, then the root's")
}
