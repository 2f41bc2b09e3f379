package pgjournal_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/pgjournal"
)

// A replica's Run that meets a host answering, but slowly, within the
// attempt timeout (payment APIs may take many seconds: Klarna's answer
// 500 TIMEOUT only after 59 s, docs.klarna.com "Request Timeout"), visits
// no more
// than WithResumeConcurrency of that host's backlog at once, reaches
// the healthy host's operation due after the whole backlog while every
// request to the slow host is still held, and keeps no claim on the slow
// host's operations it is not visiting: another replica's ClaimDue
// finds all of them but those on the wire. Once the slow host answers,
// every operation settles, each executed once. Default settings but the
// clock.
func TestRunSlowHostKeepsNoIdleClaims(t *testing.T) {
	const backlog = 300 // more than one pass's claim
	share := idem.DefaultResumeConcurrency
	ctx := context.Background()
	clock := idemtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	schema := openStore(t).Schema()
	newServer := func() *idemtest.Server {
		srv, err := idemtest.NewServer(idemtest.WithClock(clock.Now))
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		return srv
	}
	slow, healthy := newServer(), newServer()
	open := func() *pgjournal.Store {
		s, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}

	// Every order executes and its answer is lost: the slow server's
	// backlog, then, a minute later, the healthy server's order.
	setup, err := idem.New(open(), idem.WithClock(clock), idem.WithMaxAttempts(1))
	require.NoError(t, err)
	require.NoError(t, slow.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Count: backlog}))
	require.NoError(t, healthy.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit}))
	submit := func(srv *idemtest.Server, key string) {
		_, err := setup.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
	}
	for i := range backlog {
		submit(slow, fmt.Sprintf("slow-%03d", i))
	}
	clock.Advance(time.Minute)
	submit(healthy, "healthy")
	require.NoError(t, setup.Close())
	clock.Advance(2 * time.Minute) // all due, well inside the key window

	network := &slowGate{base: http.DefaultTransport, host: strings.TrimPrefix(slow.URL, "http://"), open: make(chan struct{})}
	settled := make(chan string, backlog+1)
	c, err := idem.New(open(), idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
		idem.WithLease("replica-a", idem.DefaultLeaseDuration), idem.WithSettleFunc(func(r *idem.Result) { settled <- r.Key }))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()

	select {
	case k := <-settled:
		require.Equal(t, "healthy", k, "the first settlement")
	case err := <-ran:
		t.Fatalf("Run() returned %v", err)
	case <-time.After(idem.DefaultAttemptTimeout * 3 / 4): // the held requests' timeout would end them
		t.Fatalf("the healthy server's operation unsettled while %d requests to the slow host are held", network.held.Load())
	}
	require.Zero(t, network.timedOut.Load(), "requests to the slow host that timed out")
	// The first of Run's visits to the slow host asks its clock with a
	// HEAD (no answer of the host's has taught it): the rest of the
	// host's share wait for its answer, each holding its claim.
	require.Equal(t, int64(1), network.held.Load(), "requests to the slow host held: the HEAD")
	require.Equal(t, 1, healthy.Effects("", "healthy"))

	// Another replica may take every slow-host operation but those on
	// the wire (due or not: some were pushed back).
	other := open()
	now := clock.Now().Add(2 * idem.DefaultReconcileMaxInterval)
	claimed, err := other.ClaimDue(ctx, "replica-b", now, now.Add(time.Minute), 0)
	require.NoError(t, err)
	require.Len(t, claimed, backlog-share, "operations another replica could claim")
	for _, cl := range claimed {
		require.True(t, strings.HasPrefix(cl.Record.Key, "slow-"), cl.Record.Key)
		require.NoError(t, other.Release(ctx, cl.Lease))
	}

	close(network.open)
	keys := map[string]bool{}
	timeout := time.After(60 * time.Second)
	for len(keys) < backlog {
		select {
		case k := <-settled:
			require.False(t, keys[k], "%s settled twice", k)
			keys[k] = true
		case err := <-ran:
			t.Fatalf("Run() returned %v", err)
		case <-timeout:
			t.Fatalf("%d of %d operations settled after 60s (clock %v)", len(keys), backlog, clock.Now())
		}
	}
	for i := range backlog {
		key := fmt.Sprintf("slow-%03d", i)
		require.Equal(t, 1, slow.Effects("", key), "side effects of %s", key)
	}
	require.Equal(t, 2*backlog+1, slow.Stats().Requests, "the slow server's requests: each key's lost one, then Run's HEAD and resends")
	require.Zero(t, network.timedOut.Load(), "requests to the slow host that timed out")
}

// slowGate holds every request to one host until open is closed, as a server
// that takes its time to answer does, and passes the rest through.
type slowGate struct {
	base     http.RoundTripper
	host     string
	open     chan struct{}
	held     atomic.Int64
	timedOut atomic.Int64
}

func (g *slowGate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != g.host {
		return g.base.RoundTrip(r)
	}
	g.held.Add(1)
	defer g.held.Add(-1)
	select {
	case <-g.open:
		return g.base.RoundTrip(r)
	case <-r.Context().Done():
		g.timedOut.Add(1)
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, r.Context().Err()
	}
}
