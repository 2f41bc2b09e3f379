package idem_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Orders whose answers were lost (a load balancer reset the connections
// after the server committed them) just before the server became
// unreachable for two hours: their key window passes during the outage,
// and Run, unable to ask the result endpoint, flags them "key expired".
// Once the server is back the endpoint can settle them, but only while
// it keeps their keys: 24 hours, as Stripe's and the fake server's
// windows. A flagged operation was queried again only a day after its
// last query, which went unanswered in the outage: the first query that
// reached the server came after it had forgotten the keys, and orders the
// server confirmed all day were left to a person for good. Default
// settings but the clock.
func TestRunSettlesFlaggedOperationsOnceTheServerIsBack(t *testing.T) {
	for _, down := range outageShapes {
		t.Run(down.name, func(t *testing.T) { runSettlesFlaggedAfterOutage(t, down.mode, netUp) })
	}
	// Back with its read path behind: the first query after the outage
	// finds nothing, and the next was a day later, when the server had
	// forgotten the key.
	t.Run("read path behind on return", func(t *testing.T) { runSettlesFlaggedAfterOutage(t, netDown, netReadBehind) })
	t.Run("database down, read path behind on return", func(t *testing.T) { runSettlesFlaggedAfterOutage(t, netDatabaseDown, netReadBehind) })
}

// outageShapes are the ways a server's outage reaches the client: no
// connection, a CDN's edge answering for the origin with its own page,
// the API's own 500, or a gateway refusing every request's credentials.
var outageShapes = []struct {
	name string
	mode int32
}{
	{"connections refused", netDown},
	{"Cloudflare 521 for the origin", netOriginDown},
	{"database down: 500 to every request", netDatabaseDown},
	{"identity provider down: Envoy's 401 to every request", netIdentityDown},
	{"API key rejected until rotated: API Gateway's 403", netKeyRejected},
}

// behindOutage starts a fake server and a Client (closed with the test) on
// a clock at epoch, with an outage transport between them, the client's
// options given opts (for the server's URL) and default settings
// otherwise; the server's options are srvOpts. e.store is the client's
// journal.
func behindOutage(t *testing.T, opts func(srv *idemtest.Server) []idem.Option, srvOpts ...idemtest.Option) (*env, *outage) {
	t.Helper()
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, append([]idemtest.Option{idemtest.WithClock(clock.Now)}, srvOpts...)...)
	network := &outage{base: srv.Client().Transport}
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock)}, opts(srv)...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &env{t: t, srv: srv, clock: clock, store: store, client: c, ctx: t.Context()}, network
}

func runSettlesFlaggedAfterOutage(t *testing.T, down, back int32) {
	const n = 5
	logs := &logCapture{}
	e, network := behindOutage(t, func(srv *idemtest.Server) []idem.Option {
		return []idem.Option{idem.WithResultEndpoint(srv.URL + "/operations/{key}"), idem.WithLogger(slog.New(logs))}
	})
	srv, clock, store, c := e.srv, e.clock, e.store, e.client

	network.mode.Store(netLossy)
	for i := range n {
		_, err := c.Submit(t.Context(), idem.Request{Key: fmt.Sprint("k", i), URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	}
	before := make(map[string]int, n)
	for i := range n {
		before[fmt.Sprint("k", i)] = len(e.submits(fmt.Sprint("k", i)))
	}
	network.mode.Store(down)
	runUntil(t, e, epoch.Add(2*time.Hour))
	flagged, err := c.List(t.Context(), idem.Filter{Open: true, Review: true})
	require.NoError(t, err)
	require.Len(t, flagged, n, "flagged during the outage: their key window passed")
	// Rechecked more often than daily, but a person is told once of each
	// reason: every later visit that does not settle it is the
	// reconciler's routine. A gateway refusing credentials refuses the
	// resends inside the key window too, flagged first for that
	// (ReviewRefusedAfterSend), then for the window passing.
	levels, attrs := logs.find("idem: flagged for review")
	warned := map[string]int{}
	keys := map[string]bool{}
	for i, l := range levels {
		if l >= slog.LevelWarn {
			warned[attrs[i]["key"].String()+" / "+attrs[i]["review"].String()]++
			keys[attrs[i]["key"].String()] = true
		}
	}
	for told, times := range warned {
		require.Equalf(t, 1, times, "flagged-for-review warnings for %s in the outage (%d records)", told, len(levels))
	}
	require.Lenf(t, keys, n, "operations a person was told of in the outage: %v", warned)

	network.mode.Store(back)
	runUntil(t, e, epoch.Add(4*time.Hour))
	for i := range n {
		k := fmt.Sprint("k", i)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateSucceeded, rec.State, "%s two hours after the server came back (review %q, next due in %v)",
			k, rec.Review, rec.NextDue.Sub(clock.Now()))
		require.Emptyf(t, rec.Review, "review of %s", k)
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		require.Equalf(t, before[k], len(e.submits(k)), "submits of %s the server received since the outage: past its key window, only queries", k)
	}
}
