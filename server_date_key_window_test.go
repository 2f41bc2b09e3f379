package idem_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// lostOrders journals, on a client whose clock is right, one order per
// key to srv, each executed by the server and its answer lost
// (DropAfterCommit): one attempt each, unknown. resultEndpoint journals
// them with srv's result endpoint.
func lostOrders(t *testing.T, srv *idemtest.Server, clock *idemtest.Clock, path string, resultEndpoint bool, keys ...string) {
	t.Helper()
	store, err := journal.Open(path)
	require.NoError(t, err)
	opts := []idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithClock(clock), idem.WithMaxAttempts(1)}
	if resultEndpoint {
		opts = append(opts, idem.WithResultEndpoint(srv.ResultTemplate()))
	}
	c, err := idem.New(store, opts...)
	require.NoError(t, err)
	for _, k := range keys {
		require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: k}))
		_, err := c.Submit(t.Context(), idem.Request{Key: k, URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, k)
	}
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())
}

// serverSubmits counts srv's submits per key, and fails on one without a
// key (each attempt must carry its operation's). Queries (GET) and clock
// probes (HEAD) are no submits.
func serverSubmits(t *testing.T, srv *idemtest.Server) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			continue
		}
		require.NotEmpty(t, r.Key, "a submit without its key")
		n[r.Key]++
	}
	return n
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot, an RTC wrong at boot that NTP has not stepped yet) calls
// Resume at start-up and Do, before Run has measured any time. Orders
// taken 70 minutes ago had their answers lost; the server (Stripe-like:
// it replays a key within its window, forgets it after, and sends Date
// on every answer, RFC 9110 6.6.1) keeps keys 20 minutes, the client's
// default window. By the stepped clock those keys are 10 minutes old,
// nothing journaled lies in its future, and a resend would be executed
// afresh: a second order each. The server's Date, learnt from the first
// answers (the result endpoint's, asked first; without one, any earlier
// answer from the host, here a new order's), says they are past the
// window: no resend, flagged ReviewClockStepped. Orders taken 30 minutes
// ago lie in the stepped clock's future and were flagged before.
func TestServerDateKeepsForgottenKeysFromResendAfterClockSteppedBack(t *testing.T) {
	for _, withResult := range []bool{true, false} {
		name := "result endpoint"
		if !withResult {
			name = "replay only"
		}
		t.Run(name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch) // the true time, the server's
			srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.DefaultKeyRetention))
			path := filepath.Join(t.TempDir(), "idem.journal")
			var old, recent []string
			for i := range 8 {
				old = append(old, fmt.Sprintf("old%d", i))
				recent = append(recent, fmt.Sprintf("recent%d", i))
			}
			lostOrders(t, srv, clock, path, withResult, old...)
			clock.Advance(40 * time.Minute)
			lostOrders(t, srv, clock, path, withResult, recent...)
			clock.Advance(30 * time.Minute)

			clk := &skewedClock{Clock: clock}
			clk.offset.Store(int64(-time.Hour))
			store, err := journal.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			opts := []idem.Option{idem.WithHTTPClient(srv.Client()), idem.WithClock(clk)}
			if withResult {
				opts = append(opts, idem.WithResultEndpoint(srv.ResultTemplate()))
			}
			c, err := idem.New(store, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })

			if withResult {
				// The caller retries its order: the query comes first.
				_, err := c.Submit(t.Context(), idem.Request{Key: old[0], URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
				require.ErrorIs(t, err, idem.ErrNeedsReview)
			} else {
				// A new order teaches the host's clock; it is sent once.
				res, err := c.Submit(t.Context(), idem.Request{Key: "new", URL: srv.URL + "/orders", Body: []byte(`{"order":2}`)})
				require.NoError(t, err)
				require.Equal(t, idem.StateSucceeded, res.State)
				require.Equal(t, 1, srv.Effects("", "new"), "orders for the new key")
			}
			_, err = c.Resume(t.Context())
			require.NoError(t, err)

			submits := serverSubmits(t, srv)
			for _, k := range append(old, recent...) {
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				require.Equalf(t, 1, submits[k], "submits of %s (the lost one only)", k)
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
				require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
			}
			if !withResult {
				require.Equal(t, 1, submits["new"], "submits of the new order")
				require.Len(t, submits, len(old)+len(recent)+1, "keys submitted")
			} else {
				require.Len(t, submits, len(old)+len(recent), "keys submitted")
			}
		})
	}
}

// dateTransport sets the Date of every answer to date(), or removes it
// when that is "": a server (or a proxy before it) whose Date is missing,
// garbled or wrong.
type dateTransport struct {
	base http.RoundTripper
	date func() string
}

func (d *dateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	if err == nil {
		if v := d.date(); v != "" {
			resp.Header.Set("Date", v)
		} else {
			resp.Header.Del("Date")
		}
	}
	return resp, err
}

// A server's Date that says nothing usable about its clock changes
// nothing: absent (RFC 9110 6.6.1 lets a server without a clock leave it
// out), garbled, or behind ours (a cached answer's is as old as the
// cache's copy; a device that lost its time reads 1970). One days ahead
// of ours holds resends back (TestServerDateDaysAheadHoldsResendsBack). The orders' answers
// were lost 10 minutes ago, well inside the window: Resume resends each
// with its key and the server replays it, one order each, nothing
// flagged.
func TestServerDateWithoutMeaningChangesNothing(t *testing.T) {
	cases := []struct {
		name string
		date func(now time.Time) string
	}{
		{"absent", func(time.Time) string { return "" }},
		{"garbled", func(time.Time) string { return "Sun, 99 Nov 1994 08:49:37 GMT" }},
		{"not a date", func(time.Time) string { return "yesterday" }},
		{"behind an hour", func(now time.Time) string { return now.Add(-time.Hour).UTC().Format(http.TimeFormat) }},
		{"1970", func(time.Time) string { return time.Unix(0, 0).UTC().Format(http.TimeFormat) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.DefaultKeyRetention))
			path := filepath.Join(t.TempDir(), "idem.journal")
			keys := []string{"k0", "k1", "k2", "k3", "k4"}
			lostOrders(t, srv, clock, path, false, keys...)
			clock.Advance(10 * time.Minute)

			store, err := journal.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			hc := &http.Client{Transport: &dateTransport{base: srv.Client().Transport, date: func() string { return tc.date(clock.Now()) }}}
			c, err := idem.New(store, idem.WithHTTPClient(hc), idem.WithClock(clock))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			// An answer with that Date first, as Resume's earlier visits
			// would give.
			_, err = c.Submit(t.Context(), idem.Request{Key: "new", URL: srv.URL + "/orders", Body: []byte(`{"order":2}`)})
			require.NoError(t, err)
			_, err = c.Resume(t.Context())
			require.NoError(t, err)

			want := map[string]int{"new": 1}
			for _, k := range keys {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.StateSucceeded, rec.State, "%s: review %q", k, rec.Review)
				require.Empty(t, rec.Review, k)
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				want[k] = 2
			}
			require.Equal(t, want, serverSubmits(t, srv), "submits per key")
		})
	}
}

// A server's Date three days ahead of our clock: ours is behind by days,
// or the server's Date is wrong; no answer tells which. A board without a
// real-time clock, off for three days, restarts at the time fake-hwclock
// saved at its shutdown ("NTP ... is not available early in the boot
// process", fake-hwclock(8),
// https://manpages.debian.org/wheezy/fake-hwclock/fake-hwclock.8): the
// orders whose answers it lost just before look ten minutes old, nothing
// journaled lies in its future, and the server (keys kept 20 minutes,
// Date on every answer, RFC 9110 6.6.1) forgot their keys three days
// ago. The Date, taken for a broken one, was not believed, and Resume
// resent each: a second order. Believed, it holds the resends back
// (flagged ReviewClockStepped), and a server whose Date alone is three
// days ahead costs a look at each such order, never a second order.
func TestServerDateDaysAheadHoldsResendsBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ours   time.Duration // our clock minus the true time, after the restart
		server time.Duration // the server's Date minus the true time
		since  time.Duration // from the lost answers to the restart
	}{
		{"our clock three days behind", -72 * time.Hour, 0, 72*time.Hour + 10*time.Minute},
		{"the server's Date three days ahead", 0, 72 * time.Hour, 10 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch) // the true time
			srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.DefaultKeyRetention))
			path := filepath.Join(t.TempDir(), "idem.journal")
			keys := []string{"k0", "k1", "k2"}
			lostOrders(t, srv, clock, path, false, keys...)
			clock.Advance(tt.since)

			clk := &skewedClock{Clock: clock}
			clk.offset.Store(int64(tt.ours))
			store, err := journal.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			hc := &http.Client{Transport: &dateTransport{base: srv.Client().Transport, date: func() string {
				return clock.Now().Add(tt.server).UTC().Format(http.TimeFormat)
			}}}
			c, err := idem.New(store, idem.WithHTTPClient(hc), idem.WithClock(clk))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			_, err = c.Resume(t.Context())
			require.NoError(t, err)

			submits := serverSubmits(t, srv)
			for _, k := range keys {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
				require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
				require.Equalf(t, 1, submits[k], "submits of %s (the lost one only)", k)
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
			}
		})
	}
}
