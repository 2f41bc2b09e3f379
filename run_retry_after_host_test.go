package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// throttling answers every submit status, with a Retry-After that ends
// at until, before until: a rate limiter in front of an API back from an
// outage, flooded by every client catching up, asks the client to wait,
// not one request.
func throttling(status int, until time.Time) func(time.Time, http.ResponseWriter) bool {
	return func(now time.Time, w http.ResponseWriter) bool {
		if !now.Before(until) {
			return false
		}
		w.Header().Set("Retry-After", fmt.Sprint(int(until.Sub(now)/time.Second)+1))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":"slow down"}`)
		return true
	}
}

// throttledBacklog journals backlog orders to srv (keys k000, k001, …)
// taken while it was down, never sent, and returns the journal and a
// Client on it, at default settings but the clock, three minutes on:
// all due, the server up and throttling.
func throttledBacklog(t *testing.T, clock *idemtest.Clock, srv *orderAPI, backlog int) (*journal.Store, *env) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.journal")
	store, err := journal.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	network := &downTransport{clock: clock, up: epoch.Add(time.Hour * 24 * 365)}
	setup, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: network}), idem.WithClock(clock), idem.WithMaxAttempts(1))
	require.NoError(t, err)
	for i := range backlog {
		res, err := setup.Submit(t.Context(), idem.Request{Key: fmt.Sprintf("k%03d", i), URL: srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.Equal(t, idem.StatePending, res.State)
	}
	require.NoError(t, setup.Close())
	clock.Advance(3 * time.Minute)

	c, err := idem.New(store, idem.WithHTTPClient(srv.srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return store, &env{t: t, clock: clock, client: c, ctx: t.Context()}
}

// throttledHour journals backlog orders (throttledBacklog) to a server
// whose submits refuse, given until, answers from three minutes on
// until an hour later, and runs Run through that hour, checking that it
// sent the server no more than most requests in it (to a minute before
// until), then three hours on. It returns the journal, the submits the
// server refused and the orders it took.
func throttledHour(t *testing.T, backlog int, refuse func(until time.Time) func(time.Time, http.ResponseWriter) bool, most int) (store *journal.Store, throttled int, orders map[string]int) {
	t.Helper()
	clock := idemtest.NewClock(epoch)
	until := epoch.Add(3*time.Minute + time.Hour)
	srv := newOrderAPI(t, clock, refuse(until))
	store, e := throttledBacklog(t, clock, srv, backlog)
	runUntil(t, e, until.Add(-time.Minute))
	throttled, _ = srv.counts()
	require.LessOrEqual(t, throttled, most,
		"requests sent to a server that throttled this client until %v, before then", until.Sub(epoch))
	runUntil(t, e, until.Add(3*time.Hour))
	_, orders = srv.counts()
	return store, throttled, orders
}

// requireEachOrderedOnce checks that each of the backlog's orders
// (throttledBacklog) succeeded, unflagged, and was ordered once.
func requireEachOrderedOnce(t *testing.T, store *journal.Store, backlog int, orders map[string]int) {
	t.Helper()
	for i := range backlog {
		k := fmt.Sprintf("k%03d", i)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateSucceeded, rec.State, "state of %s", k)
		require.Emptyf(t, rec.Review, "review of %s", k)
		require.Equalf(t, 1, orders[k], "orders for %s", k)
	}
}

// A server back from an outage that answers "429 (or 503), come back in
// an hour" is asking this client, not one of its requests, to wait: Run
// must not send every other due operation to it regardless, nor probe it
// every pass, until the hour is up. Then every operation settles, each
// ordered once. Default settings but the clock.
func TestRunHonoursAHostsRetryAfterAcrossOperations(t *testing.T) {
	const backlog = 200
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			store, throttled, orders := throttledHour(t, backlog, func(until time.Time) func(time.Time, http.ResponseWriter) bool {
				return throttling(status, until)
			}, 2*idem.DefaultResumeConcurrency)
			flagged := 0
			for i := range backlog {
				k := fmt.Sprintf("k%03d", i)
				rec, err := store.Get(t.Context(), idem.DefaultScope, k)
				require.NoError(t, err)
				if status == http.StatusServiceUnavailable && rec.State == idem.StateUnknown {
					// A gateway's 503 may follow an order the API took:
					// an hour on, past the key window, only a person may
					// send it again.
					require.Equalf(t, idem.ReviewKeyExpired, rec.Review, "review of %s", k)
					require.Zerof(t, orders[k], "orders for %s", k)
					flagged++
					continue
				}
				require.Equalf(t, idem.StateSucceeded, rec.State, "state of %s", k)
				require.Equalf(t, 1, orders[k], "orders for %s", k)
			}
			require.LessOrEqual(t, flagged, throttled, "flagged for review")
		})
	}
}
