package idem_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A clock stepped back five minutes (NTP putting right a clock that ran
// fast) must not make Run resend keys the server has forgotten. The
// orders were taken two hours ago, their answers lost, and the server
// went down; it keeps keys two hours, and comes back a minute after it
// forgot them. By the stepped clock the keys are four minutes short of
// two hours old; Run, which has measured its own two hours, must not
// send them again: a second order each.
func TestRunKeyWindowOutlivesClockSteppedBack(t *testing.T) {
	const backlog = 50
	clock := idemtest.NewClock(epoch)
	clk := &steppedClock{Clock: clock}
	const window = 2 * time.Hour
	srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(window))
	store, submit, closeSetup := unconfirmed(t, clock)
	keys := make([]string, backlog)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
		submit(srv, keys[i])
	}
	closeSetup()
	up := epoch.Add(window + time.Minute)
	clk.from, clk.to, clk.ahead = epoch.Add(window-2*time.Minute), epoch.Add(100*time.Hour), -5*time.Minute

	c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: &downTransport{base: srv.Client().Transport, clock: clock, up: up}}),
		idem.WithClock(clk), idem.WithKeyRetention(window))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	runUntil(t, e, up.Add(10*time.Minute))
	for _, k := range keys {
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s, in the minutes the clock reads too little", k)
	}
	runUntil(t, e, up.Add(3*time.Hour)) // every one visited again
	for _, k := range keys {
		require.Equalf(t, 1, srv.Effects("", k), "orders for %s", k)
		rec, err := store.Get(t.Context(), idem.DefaultScope, k)
		require.NoError(t, err)
		require.Equalf(t, idem.StateUnknown, rec.State, "state of %s", k)
		require.Containsf(t, []string{idem.ReviewClockStepped, idem.ReviewKeyExpired}, rec.Review, "review of %s", k)
	}
}
