package idem_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
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
// nothing) or refuse every connection (the server is down).
type outage struct {
	base    http.RoundTripper
	mode    atomic.Int32 // one of netUp, netLossy, netDown
	refused atomic.Int64
}

const (
	netUp = iota
	netLossy
	netDown
)

func (o *outage) RoundTrip(r *http.Request) (*http.Response, error) {
	switch o.mode.Load() {
	case netDown:
		if r.Body != nil {
			_ = r.Body.Close()
		}
		o.refused.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
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

// A restart during an outage must not hold the service's start-up for as
// long as its whole backlog times the per-call budget: Resume gives up
// after a run of visits that got nowhere, leaves the rest journaled and
// due, and a later Resume settles every one, each executed once. Default
// settings but the clock.
func TestResumeLeavesBacklogToReconcilerDuringOutage(t *testing.T) {
	const n = 100
	clock := idemtest.NewClock(epoch)
	srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	network := &outage{base: srv.Client().Transport}
	path := filepath.Join(t.TempDir(), "idem.journal")
	open := func() (*journal.Store, *idem.Client) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
			idem.WithResultEndpoint(srv.URL+"/operations/{key}"))
		require.NoError(t, err)
		return store, c
	}
	closeAll := func(store *journal.Store, c *idem.Client) {
		require.NoError(t, c.Close())
		require.NoError(t, store.Close())
	}

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
	store, c = open()
	defer closeAll(store, c)
	sum, err = c.Resume(t.Context())
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: n, Succeeded: n}, sum)
	for _, k := range keys {
		require.Equal(t, 1, srv.Effects("", k), "side effects of %s (the server scopes keys by Authorization: none here)", k)
	}
}
