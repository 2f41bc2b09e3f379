package idem_test

import (
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

// One server down must not hold up the reconciliation of the others'
// operations behind its backlog: Run stops visiting a host whose visits,
// many in a row, got nowhere, and pushes its due operations back, probing
// it once a pass. A healthy server's operation due after a backlog for the
// down one settles without the whole backlog visited first, and once the
// down server is back every operation settles, each executed once.
// Default settings but the clock. A host behind a CDN is as unreachable
// when the CDN's edge answers every request for it with its own page.
func TestRunDefersTheUnreachableHostsBacklog(t *testing.T) {
	for _, edge := range []bool{false, true} {
		t.Run(fmt.Sprintf("edge=%t", edge), func(t *testing.T) { runDefersTheUnreachableHostsBacklog(t, edge) })
	}
}

func runDefersTheUnreachableHostsBacklog(t *testing.T, edge bool) {
	const backlog = 300
	giveUp := 2 * idem.DefaultResumeConcurrency
	clock := idemtest.NewClock(epoch)
	down, up := downAndUp(t, clock)
	store := backlogThen(t, clock, down, "down", backlog, up, "up")

	network := &hostDown{base: http.DefaultTransport, host: strings.TrimPrefix(down.URL, "http://"), edge: edge}
	settled := make(chan string, backlog+1)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock),
		idem.WithSettleFunc(func(r *idem.Result) { settled <- r.Key }))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	ran := runAsync(t.Context(), c)
	waitSettled := func(n int) []string {
		t.Helper()
		var keys []string
		timeout := time.After(20 * time.Second)
		for len(keys) < n {
			select {
			case k := <-settled:
				keys = append(keys, k)
			case err := <-ran:
				t.Fatalf("Run() returned %v", err)
			case <-timeout:
				t.Fatalf("%d of %d operations settled after 20s (%d requests refused, clock %v)", len(keys), n, network.refused.Load(), clock.Now().Sub(epoch))
			}
		}
		return keys
	}
	require.Equal(t, []string{"up"}, waitSettled(1), "the first settlement")
	refused := network.refused.Load()
	require.LessOrEqual(t, refused, int64((giveUp+idem.DefaultResumeConcurrency)*idem.DefaultMaxAttempts),
		"requests to the down server before the healthy server's operation settled")
	require.Equal(t, 1, up.Effects("", "up"))

	// The down server is back: its backlog settles, nothing lost, nothing
	// executed twice.
	network.back.Store(true)
	waitSettled(backlog)
	for i := range backlog {
		require.Equal(t, 1, down.Effects("", fmt.Sprintf("down-%03d", i)), "side effects of down-%03d", i)
	}
	open, err := c.List(t.Context(), idem.Filter{Open: true})
	require.NoError(t, err)
	require.Empty(t, open, "operations still open")
}

// backlogThen journals, with every answer lost (all executed, none
// confirmed), a backlog of orders to many (keys prefix-000 on), then, a
// minute later, orders to other (keys): due after the whole backlog. It
// leaves the clock where all are due, well inside the key window.
func backlogThen(t *testing.T, clock *idemtest.Clock, many *idemtest.Server, prefix string, backlog int, other *idemtest.Server, keys ...string) *journal.Store {
	t.Helper()
	store, submit, closeSetup := unconfirmed(t, clock)
	for i := range backlog {
		submit(many, fmt.Sprintf("%s-%03d", prefix, i))
	}
	clock.Advance(time.Minute)
	for _, key := range keys {
		submit(other, key)
	}
	closeSetup()
	clock.Advance(2 * time.Minute)
	return store
}

// unconfirmed opens a journal (closed with the test) and a client on clock
// whose every answer is lost: submit journals an order to srv that
// executes and stays unconfirmed, with one attempt, so that the set-up
// spends none of the key window. done closes the client.
func unconfirmed(t *testing.T, clock *idemtest.Clock) (store *journal.Store, submit func(srv *idemtest.Server, key string), done func()) {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	lossy := &outage{base: http.DefaultTransport}
	lossy.mode.Store(netLossy)
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: lossy}), idem.WithClock(clock),
		idem.WithMaxAttempts(1))
	require.NoError(t, err)
	submit = func(srv *idemtest.Server, key string) {
		_, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
	}
	return store, submit, func() { require.NoError(t, c.Close()) }
}
