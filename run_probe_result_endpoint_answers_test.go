package idem_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A down host's probe whose visit only asked the operation's result
// endpoint, on another host that answered, told nothing of the host the
// orders go to: taken for the probe, it left that host down after it was
// back, and the operations due with it were pushed back by as long as
// the outage had lasted (up to an hour), as c3c46be found for a probe
// that made no exchange at all. An order sent two minutes before the
// host was back and lost on the way (a load balancer resetting the
// connection before passing it on: nothing executed) came due past its
// key window, where the endpoint's "not found" cannot let it be resent,
// and was flagged for a person instead of resent. Orders to an API
// whose result endpoint has a host of its own (WithResultEndpoint, a
// read service behind its own load balancer) that stays up through the
// orders' host's outage. Default settings but the clock.
func TestRunProbeThatOnlyAskedAnAnsweringResultEndpointDoesNotKeepAHostDown(t *testing.T) {
	giveUp := 2 * idem.DefaultResumeConcurrency
	start := epoch
	o := newOutageJournal(t, start)
	srv, store := o.srv, o.store
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	reads := httptest.NewServer(httputil.NewSingleHostReverseProxy(target)) // the result endpoint's host
	t.Cleanup(reads.Close)
	resultURL := func(key string) string { return reads.URL + "/operations/" + key }

	// The set-up: the "a-" orders (no result endpoint) and x executed,
	// their answers lost, a minute before Run starts; n sent 58 minutes
	// into the outage and lost before the server took it.
	early := numberedKeys("a-%02d", giveUp)
	o.submitAt(t, start.Add(-time.Minute), nil, nil, early...)
	o.submitAt(t, start.Add(-time.Minute), nil, resultURL, "x")
	back := start.Add(time.Hour)
	reset := rtFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errors.New("read: connection reset by peer")
	})
	o.submitAt(t, back.Add(-2*time.Minute), reset, resultURL, "n")
	require.Zero(t, srv.Effects("", "n"), "orders of n before Run")
	o.setDue(t, "x", back)
	o.setDue(t, "n", back)

	// x, settled by the result endpoint alone, is the host's probe.
	o.runThroughOutage(t, start, back)

	x, err := store.Get(t.Context(), idem.DefaultScope, "x")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, x.State, "x, settled by its result endpoint")
	for _, key := range append(early, "x") {
		require.Equal(t, 1, srv.Effects("", key), "orders of %s", key)
	}
}
