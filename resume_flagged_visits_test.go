package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Resume gives up on a host once many visits in a row to it got nowhere;
// a visit that made no exchange of its own (an order past its key window
// with no result endpoint, flagged for a person, nothing sent) counts as
// one that got somewhere and breaks the streak. After a long outage, the
// orders of its first minutes past the window and the later ones inside
// it, interleaved in the journal (random keys), a restart while the
// server is still down must still give up on the host after about as
// many visits to the later orders as without the flagged ones: the
// flagged visits end at once and are all over early, so they do not
// hold start-up for the later orders' whole budgets. A Stripe-like API
// (no result endpoint) still down. Default settings but the clock.
//
// The old orders come first (the journal walks open operations by when
// they fall due), and the bound holds once they are all flagged: a visit
// inside the window that ended before the last flagged one had its stall
// wiped by it, and Resume then visits one more. Nothing promises the
// flagged visits end first in real time; they did while each visit to
// the down host journaled its refused resends, but a visit handed off
// after its refused clock probe (refusedProbe) writes no more than a
// flagged one and sometimes ended first (5 runs of 20 under -race). The
// down host answers only once every old order is flagged, as the
// flagged visits, sending nothing, are over early in a real restart.
func TestResumeGivesUpOnADownHostBetweenFlaggedOperations(t *testing.T) {
	const perKind = 40
	giveUp := 2 * idem.DefaultResumeConcurrency
	start := epoch
	srv := newServer(t, idemtest.WithClock(idemtest.NewClock(start).Now))
	path := filepath.Join(t.TempDir(), "idem.journal")
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	// The set-up: every order executed, its answer lost; the "old" ones
	// half an hour before the restart, the "new" ones a minute before.
	submitAt := func(at time.Time, suffix string) {
		lossy := &outage{base: http.DefaultTransport}
		lossy.mode.Store(netLossy)
		c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: lossy}), idem.WithClock(idemtest.NewClock(at)),
			idem.WithMaxAttempts(1))
		require.NoError(t, err)
		for i := range perKind {
			key := fmt.Sprintf("%03d-%s", i, suffix)
			_, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
		}
		require.NoError(t, c.Close())
	}
	submitAt(start.Add(-30*time.Minute), "old")
	submitAt(start.Add(-time.Minute), "new")

	network := &hostDown{base: http.DefaultTransport, host: strings.TrimPrefix(srv.URL, "http://")}
	flagged := &afterFlagged{base: network, store: store, suffix: "old", n: perKind}
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: flagged}), idem.WithClock(idemtest.NewClock(start)))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.False(t, flagged.timedOut.Load(), "the old orders flagged before the down host was asked")
	require.Equal(t, 2*perKind, sum.Visited, "open operations found")
	for i := range perKind {
		rec, err := store.Get(t.Context(), idem.DefaultScope, fmt.Sprintf("%03d-new", i))
		require.NoError(t, err)
		require.Equal(t, "", rec.Review, "%03d-new: inside its key window", i)
		require.Equal(t, journal.StateUnknown, rec.State, "%03d-new", i)
	}
	// The bound allows each of the other workers' flagged visits, its
	// flag journaled (what afterFlagged waits for) but its end not yet
	// counted, to wipe one more silent visit's stall: under load (1 run
	// in 160) the down host's first visits ended before the last flagged
	// ones did. Without the rule, Resume visited all 40.
	visitedNew := perKind - sum.Deferred
	require.LessOrEqual(t, visitedNew, giveUp+2*(idem.DefaultResumeConcurrency-1),
		"visits to the down host's orders inside their window before giving up on it (%+v)", sum)
	require.Equal(t, perKind, sum.Review, "the orders past their window flagged (%+v)", sum)
	// Each visit's attempts, and at most one HEAD each asking the host's
	// clock before its first resend.
	require.LessOrEqual(t, network.refused.Load(), int64(visitedNew*(idem.DefaultMaxAttempts+1)), "requests to the down host")
	for i := range perKind {
		for _, suffix := range []string{"old", "new"} {
			require.Equal(t, 1, srv.Effects("", fmt.Sprintf("%03d-%s", i, suffix)), "orders of %03d-%s", i, suffix)
		}
	}
}

// afterFlagged holds every request until the n operations keyed
// "%03d-"+suffix are flagged for review in store, polled within a
// deadline well inside an attempt timeout: the visits that send nothing
// end before any that sends does.
type afterFlagged struct {
	base     http.RoundTripper
	store    *journal.Store
	suffix   string
	n        int
	done     atomic.Bool
	timedOut atomic.Bool // the deadline passed first
}

func (a *afterFlagged) RoundTrip(r *http.Request) (*http.Response, error) {
	for deadline := time.Now().Add(5 * time.Second); !a.done.Load(); time.Sleep(time.Millisecond) {
		if a.allFlagged(r.Context()) {
			a.done.Store(true)
			break
		}
		if time.Now().After(deadline) {
			a.timedOut.Store(true) // and holds none after it
			a.done.Store(true)
			break
		}
	}
	return a.base.RoundTrip(r)
}

func (a *afterFlagged) allFlagged(ctx context.Context) bool {
	for i := range a.n {
		rec, err := a.store.Get(ctx, idem.DefaultScope, fmt.Sprintf("%03d-%s", i, a.suffix))
		if err != nil || rec.Review == "" {
			return false
		}
	}
	return true
}

// Resume gives up on a host whose visits, many in a row, heard nothing
// from it, even when some of those visits end flagged for a person: an
// order past its key window whose result endpoint is on the same host
// (idemtest's /operations/{key}; MTN MoMo serves GET
// /disbursement/v1_0/transfer/{X-Reference-Id} beside the POST that
// creates it) waits out an attempt timeout for its query and is then
// flagged key expired, having heard nothing of the host. Counted as
// progress, each such visit broke the streak, and interleaved with the
// orders inside their window (random keys) it kept Resume visiting every
// one past its window, one attempt timeout after another, before giving
// up: 500 of them at 10 s, 8 at a time, hold a service's start-up for
// about 10 minutes of the outage. A host dropping every packet (a firewall, a load
// balancer without targets). So too when the result endpoint has a host
// of its own (a read service), down with the orders' host. Default
// settings but the clock and a shorter attempt timeout, which only makes
// each silent exchange end sooner in real time: what is visited and sent
// is the same.
func TestResumeGivesUpOnADownHostBetweenSlowFlaggedOperations(t *testing.T) {
	t.Run("result endpoint on the host", func(t *testing.T) { resumeBetweenSlowFlagged(t, false) })
	t.Run("result endpoint down on a host of its own", func(t *testing.T) { resumeBetweenSlowFlagged(t, true) })
}

func resumeBetweenSlowFlagged(t *testing.T, ownHost bool) {
	const perKind = 40
	giveUp := 2 * idem.DefaultResumeConcurrency
	start := epoch
	o := newOutageJournal(t, start)
	srv, store := o.srv, o.store

	// The set-up: every order executed, its answer lost; the "old" ones
	// half an hour before the restart, the "new" ones a minute before.
	var old, recent []string
	for i := range perKind {
		old = append(old, fmt.Sprintf("%03d-old", i))
		recent = append(recent, fmt.Sprintf("%03d-new", i))
	}
	resultURL := srv.ResultURL
	var network http.RoundTripper = http.DefaultTransport
	var down []*droppingHost
	if ownHost {
		reads := httptest.NewServer(http.NotFoundHandler()) // never reached: its packets are dropped
		t.Cleanup(reads.Close)
		resultURL = func(key string) string { return reads.URL + "/operations/" + key }
		down = append(down, &droppingHost{base: network, host: strings.TrimPrefix(reads.URL, "http://"), clock: o.clock})
		network = down[0]
	}
	o.submitAt(t, start.Add(-30*time.Minute), nil, resultURL, old...)
	o.submitAt(t, start.Add(-time.Minute), nil, resultURL, recent...)

	down = append(down, &droppingHost{base: network, host: strings.TrimPrefix(srv.URL, "http://"), clock: o.clock})
	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: down[len(down)-1]}), idem.WithClock(o.clock),
		idem.WithAttemptTimeout(200*time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	sent := 0
	for _, d := range down {
		_, counts := d.perPass(start)
		for _, n := range counts {
			sent += n
		}
	}
	t.Logf("summary %+v, requests to the down hosts %d", sum, sent)
	require.Equal(t, 2*perKind, sum.Visited, "open operations found")
	// As without the flagged ones: the streak that gives up, and the
	// visits already under way when it does (one share).
	visits := 2*perKind - sum.Deferred
	limit := giveUp + idem.DefaultResumeConcurrency - 1
	if ownHost {
		// A flagged visit that made no exchange with the orders' host
		// says nothing of it (the orders' host may be up, and those
		// inside their window settled by a resend: TestResumeSettlesAn-
		// UpHostsOrdersWhileItsResultHostIsDown): the host is given up
		// on only once one of its own visits got nowhere, and those
		// flagged meanwhile, quick to end, may all be visited.
		require.LessOrEqual(t, sum.Unknown, limit, "visits inside the window before giving up on the host (%+v)", sum)
		limit += perKind
	}
	require.LessOrEqual(t, visits, limit, "visits to the down host before giving up on it (%+v)", sum)
	// Each visit's attempts, and at most one HEAD each asking the host's
	// clock before its first resend.
	require.LessOrEqual(t, sent, visits*(idem.DefaultMaxAttempts+1), "requests to the down hosts")
	for _, key := range append(old, recent...) {
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		if strings.HasSuffix(key, "-new") {
			require.Equal(t, "", rec.Review, "%s: inside its key window", key)
		}
		require.Equal(t, 1, srv.Effects("", key), "orders of %s", key)
	}
}
