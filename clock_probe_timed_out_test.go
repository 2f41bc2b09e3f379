package idem_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// backAgain is a host silent at first (blackhole: it accepts connections
// and never answers) and reachable once up.
type backAgain struct {
	hole *blackhole
	up   atomic.Bool
}

func (b *backAgain) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.up.Load() {
		return b.hole.base.RoundTrip(r)
	}
	return b.hole.RoundTrip(r)
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) resends work an earlier process journaled, by Resume at
// start-up or a caller's retry, while the API's host is silent: a
// black-holed route, a firewall dropping packets, a balancer holding
// connections with no healthy backend. The HEAD asking the host's clock
// times out and teaches nothing. Minutes later the host is back. The
// server is Stripe-like: it forgot every key 50 minutes ago by its own
// clock (RFC 9110 6.6.1's Date), so a resend is a second order. A probe
// that timed out was taken as over for the process's life, and the next
// resends, Run's visits, a later Resume, the caller's next retry, went on
// a clock nothing taught: a second order per key. The host is asked
// again once an attempt timeout has passed since its probe timed out; its
// Date flags every key, none resent. Meanwhile nothing is resent to it:
// the start-up call ends once the probe has timed out, every operation
// unknown with only its lost attempt. Default settings but the clock.
func TestClockProbeTimedOutAtStartUpIsAskedAgain(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	for _, tc := range []struct{ name, startUp, later string }{
		{"Run after Resume", "Resume", "Run"},
		{"Resume after Resume", "Resume", "Resume"},
		{"the caller's retries", "Submit", "Submit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case a server, journal and client of its own
			network := &backAgain{}
			clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
				network.hole = newBlackhole(base, "")
				return network
			})
			hole := network.hole
			hole.host = strings.TrimPrefix(srv.URL, "http://") // before any request
			t.Cleanup(func() { close(hole.cut) })              // a failing test leaves none held
			retry := func() error {
				_, err := c.Submit(t.Context(), idem.Request{Key: keys[0], URL: srv.URL + "/orders", Body: []byte(`{"order":1}`)})
				return err
			}

			done := make(chan error, 1)
			go func() {
				if tc.startUp == "Resume" {
					_, err := c.Resume(t.Context())
					done <- err
					return
				}
				done <- retry()
			}()
			select {
			case err := <-done: // once the probe's attempt has timed out
				if tc.startUp == "Resume" {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				}
			case <-time.After(2 * idem.DefaultAttemptTimeout):
				t.Fatalf("%s did not end once the probe's attempt timed out", tc.startUp)
			}
			hole.mu.Lock()
			arrived, heads, first := hole.arrived, hole.heads, hole.firstMethod
			hole.mu.Unlock()
			require.Equal(t, http.MethodHead, first, "the first request to the silent host: the probe")
			require.Equal(t, 1, heads, "clock probes to the silent host")
			require.Equal(t, 1, arrived, "requests to the silent host: the probe only")
			for _, k := range keys {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s with its host silent", k)
				require.Lenf(t, rec.Attempts, 1, "attempts of %s with its host silent: the lost one", k)
			}

			// The outage lasted minutes; the host is back.
			clock.Advance(5 * time.Minute)
			network.up.Store(true)
			resent := keys // what the later call judges
			switch tc.later {
			case "Run":
				runUntil(t, &env{t: t, clock: clock, client: c, ctx: t.Context()}, clock.Now().Add(10*time.Minute))
			case "Resume":
				_, err := c.Resume(t.Context())
				require.NoError(t, err)
			case "Submit":
				err := retry()
				resent = keys[:1]
				require.Equal(t, 1, srv.Effects("", keys[0]), "orders for the key retried")
				require.ErrorIs(t, err, idem.ErrNeedsReview)
			}

			lost := map[string]int{}
			for _, k := range keys {
				require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
				lost[k] = 1
			}
			for _, k := range resent {
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				require.Equalf(t, idem.ReviewClockStepped, rec.Review, "review of %s", k)
				require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
			}
			require.Equal(t, lost, serverSubmits(t, srv), "submits per key: the lost one, no resend")
			require.Equal(t, 1, serverHeads(t, srv), "clock probes that reached the server once it was back")
		})
	}
}

// lateAnswers is a host slower than the attempt timeout while slow: each
// request reaches the server, which does its work and answers, but the
// answer comes back only after the request's attempt has timed out (a
// queue in front of an overloaded API, a saturated return path).
type lateAnswers struct {
	base http.RoundTripper
	slow atomic.Bool
}

func (l *lateAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil || !l.slow.Load() {
		return resp, err
	}
	_ = resp.Body.Close()
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// A process restarted with its clock an hour behind (a VM restored from a
// snapshot) calls Resume at start-up while the API's host answers slower
// than the attempt timeout (an overloaded API: Klarna answers 500 TIMEOUT
// only after 59 s, docs.klarna.com "Request Timeout"), though it does the
// work. The server is Stripe-like and forgot every key 50 minutes ago by
// its own clock (RFC 9110 6.6.1's Date). The HEAD asking the host's clock
// times out; its waiters went on a clock nothing taught, the host took
// each resend as a new order, and so did every later visit's: 23 second
// orders of 40. Now none of the resends behind a probe that timed out is
// sent: each operation is left unknown, due an attempt timeout later;
// once the host answers in time, Run asks its clock again and its Date
// flags every key, none resent (or our clock does, once past the window
// for a key Run reaches late). Default settings but the clock.
func TestClockProbeTimedOutHoldsTheResendsToASlowHost(t *testing.T) {
	// Parallel: it waits out a real attempt timeout (10 s) on a silent
	// host, idle meanwhile, and shares nothing with other tests.
	t.Parallel()
	network := &lateAnswers{}
	network.slow.Store(true)
	clock, srv, store, keys, c := steppedBackHour(t, func(base http.RoundTripper) http.RoundTripper {
		network.base = base
		return network
	})
	// Due when the host may be asked again: an attempt timeout after the
	// probe timed out, by steppedBackHour's client clock, which no sleep
	// moved (nothing was resent).
	again := clock.Now().Add(-time.Hour + idem.DefaultAttemptTimeout)
	_, err := c.Resume(t.Context())
	require.NoError(t, err)

	twice := 0
	for _, k := range keys {
		if srv.Effects("", k) > 1 {
			twice++
		}
	}
	require.Zero(t, twice, "keys ordered twice with the host slow")
	lost := map[string]int{}
	for _, k := range keys {
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateUnknown, rec.State, "state of %s with its host slow", k)
		require.Lenf(t, rec.Attempts, 1, "attempts of %s with its host slow: the lost one", k)
		if !rec.NextDue.Equal(again) {
			// Resume stops after a run of visits that got nowhere; those
			// it left are due already, and their first visit hands them
			// off likewise (or asks the host again).
			require.Truef(t, rec.NextDue.Before(again.Add(-idem.DefaultAttemptTimeout)), "%s due at %v: neither left due nor due at %v", k, rec.NextDue, again)
		}
		lost[k] = 1
	}
	require.Equal(t, lost, serverSubmits(t, srv), "submits per key with the host slow: the lost one")
	require.Equal(t, 1, serverHeads(t, srv), "clock probes that reached the server, slow")

	network.slow.Store(false)
	// A key Run reaches only once its window has passed by our clock too
	// (handed off while the host was silent, then due on Run's schedule)
	// is flagged for that, as surely never resent.
	runFlagsEveryKey(t, clock, c, srv, store, keys, 2, idem.ReviewClockStepped, idem.ReviewKeyExpired) // the slow probe, the answered one
}
