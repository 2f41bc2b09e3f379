package idem_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Orders past their key window whose result endpoint, on a host of its
// own (a read service behind its own load balancer), refuses connections
// while the orders' host is up, left to Run with orders inside their
// window beside them. Past the window only a query may settle an order
// (DESIGN.md, key retention: "the client only queries; if that is
// inconclusive the operation stays unknown with the reason key
// expired"): Run must send none of them again, however long the read
// service is down, nor skip them for good once it is back: each is
// settled by its query (the server keeps keys 24 h, as Stripe does:
// docs.stripe.com/api/idempotent_requests), not left to a person. The
// orders inside their window may be resent (the server replays them);
// every order is made once. Default settings but the clock. Passes as
// is: a guard.
func TestRunPastWindowOrdersWhileTheirResultHostIsDown(t *testing.T) {
	for _, tt := range []struct {
		name   string
		edge   bool // Cloudflare's 521 for the origin, not connections refused
		outage time.Duration
	}{
		{"connections refused", false, 2 * time.Hour},
		{"Cloudflare 521 for the origin", true, 2 * time.Hour},
		// Back with an hour and a half of the server's 24 h left: the
		// rechecks of the flagged orders must not have grown past it.
		{"connections refused for 22 hours", false, 22 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) { runPastWindowResultHostDown(t, tt.edge, tt.outage) })
	}
}

func runPastWindowResultHostDown(t *testing.T, edge bool, outage time.Duration) {
	const old, recent = 12, 4
	start := epoch
	o := newOutageJournal(t, start)
	clock, srv, store := o.clock, o.srv, o.store
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	reads := httptest.NewServer(httputil.NewSingleHostReverseProxy(target)) // the server's own /operations/{key}
	t.Cleanup(reads.Close)
	resultURL := func(key string) string { return reads.URL + "/operations/" + key }

	oldKeys, newKeys := o.submitOldAndRecent(t, start, resultURL, old, recent)

	network := &hostDown{base: http.DefaultTransport, host: strings.TrimPrefix(reads.URL, "http://"), edge: edge}
	_, stop := o.run(t, network)
	back := start.Add(outage)
	o.runTo(t, start, back, func() {
		require.Positive(t, network.refused.Load(), "queries refused while the read service was down")
		for _, key := range oldKeys {
			rec, err := store.Get(t.Context(), idem.DefaultScope, key)
			require.NoError(t, err)
			require.Truef(t, rec.Open(), "%s settled with its result endpoint down: %s", key, rec.State)
			require.Equalf(t, idem.ReviewKeyExpired, rec.Review, "%s: past its key window, its query unanswered", key)
			require.Equalf(t, 1, postsOf(t, srv, key), "%s: sends, past its key window", key)
		}
		network.back.Store(true)
	})
	o.runTo(t, start, back.Add(3*time.Hour), func() {})
	stop()

	for _, key := range oldKeys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equalf(t, journal.StateSucceeded, rec.State, "%s three hours after its result endpoint was back (review %q, next due in %v)",
			key, rec.Review, rec.NextDue.Sub(clock.Now()))
		require.Emptyf(t, rec.Review, "%s", key)
		require.Equalf(t, 1, postsOf(t, srv, key), "%s: sends, past its key window", key)
		require.Equalf(t, 1, srv.Effects("", key), "orders of %s", key)
	}
	for _, key := range newKeys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equalf(t, journal.StateSucceeded, rec.State, "%s (review %q)", key, rec.Review)
		require.Equalf(t, 1, srv.Effects("", key), "orders of %s", key)
	}
}

// postsOf counts the submits carrying key that reached srv, and asserts
// they carried one body.
func postsOf(t *testing.T, srv *idemtest.Server, key string) int {
	t.Helper()
	var bodies [][32]byte
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && r.Key == key {
			bodies = append(bodies, r.BodySHA256)
		}
	}
	for _, b := range bodies {
		require.Equal(t, bodies[0], b, "the bodies sent with %s", key)
	}
	return len(bodies)
}
