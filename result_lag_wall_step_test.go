package idem_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

// monotonicSkewedClock is a skewedClock that also reads a clock no step
// of its offset moves, as time.Now's monotonic reading does: the shared
// clock's time since start.
type monotonicSkewedClock struct {
	skewedClock
	start time.Time
}

// Monotonic is the time since start by the shared clock, whatever the
// offset.
func (c *monotonicSkewedClock) Monotonic() time.Duration { return c.Clock.Now().Sub(c.start) }

// slowBootClock is a service's clock five minutes slow, as it reads at
// boot before chrony's makestep (or ntpd -g) puts it right, beside the
// true time, shared (the exchange's).
func slowBootClock() (*idemtest.Clock, *monotonicSkewedClock) {
	shared := idemtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	clk := &monotonicSkewedClock{skewedClock: skewedClock{Clock: shared}, start: shared.Now()}
	clk.offset.Store(int64(-5 * time.Minute))
	return shared, clk
}

// stepRightThenResumeOnlyAsks steps clk right, five seconds on: Resume,
// the read path still a minute behind, must only ask about key's order
// (placed once), never send it again.
func stepRightThenResumeOnlyAsks(t *testing.T, shared *idemtest.Clock, clk *monotonicSkewedClock, c *idem.Client, srv *idemtest.Server, key string) {
	t.Helper()
	clk.offset.Store(0)
	shared.Advance(5 * time.Second)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	requireOrders(t, srv, key, 1, 1)
	require.Equal(t, idem.Summary{Visited: 1, Unknown: 1}, sum)
}

// A service started at boot with its clock five minutes slow, before
// chrony's makestep (or ntpd -g) put it right, sent an order whose answer
// was lost, and the call ended unknown, the read path still lagging; the
// step landed just after. By the wall clock the send was then five
// minutes old, the lag over, and Resume's -2013 from Binance's read
// path, still up to about a minute behind (dev.binance.vision FAQ,
// "Order does not exist."), let the client order id go again: the market
// order had filled, its id was free, and the resend placed a second
// order. This process's sends are aged by the time it has lived by a
// clock no step moves: that Resume only asks, and the next, once the lag
// has passed, finds the one order.
func TestResultLagAcrossAWallClockSteppedForwardAfterTheSend(t *testing.T) {
	shared, clk := slowBootClock()
	key := crashtest.Key(1)
	srv, opts := openOnlyServer(t, shared, clk, loseFirst, idemtest.Fault{Kind: idemtest.QueryLag, Key: key, Delay: 62 * time.Second})
	c, err := idem.Open(filepath.Join(t.TempDir(), "j"), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	res, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(1)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)
	require.Len(t, srv.Requests(), idem.DefaultMaxAttempts, "the order, then a query for each attempt left")
	requireOrders(t, srv, key, 1, 1)

	stepRightThenResumeOnlyAsks(t, shared, clk, c, srv, key)
	require.Len(t, srv.Requests(), 2*idem.DefaultMaxAttempts, "a query for each of the visit's attempts")

	shared.Advance(idem.DefaultResultLag)
	requireFirstOrderFound(t, c, srv, key)
	require.Len(t, srv.Requests(), 2*idem.DefaultMaxAttempts+1)
}

// keySubmits counts the server's submits that carry key.
func keySubmits(srv *idemtest.Server, key string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Key == key && r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// The same service, its clock put right before any order: a step seen
// before a send (here by the lag's first check, on an order whose answer
// was lost) does not age that send, nor hold it for the step. An order
// the exchange never placed (Binance's -1001 "Internal error", a 500
// before commit) is resent once the lag has passed since it was sent,
// not the lag plus the step: counting every send from the clock at
// birth would hold it as much longer, past the key window for a clock an
// hour off at boot (flagged for a person rather than resent).
func TestResultLagAfterAWallClockStepSeenBeforeTheSend(t *testing.T) {
	shared, clk := slowBootClock()
	lost, unplaced := crashtest.Key(1), crashtest.Key(2)
	srv, opts := openOnlyServer(t, shared, clk, loseFirst,
		idemtest.Fault{Kind: idemtest.QueryLag, Key: lost, Delay: 62 * time.Second}, idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: unplaced})
	c, err := idem.Open(filepath.Join(t.TempDir(), "j"), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	requireResume(t, c, idem.Summary{}) // the first call: born by the slow clock

	clk.offset.Store(0)
	shared.Advance(10 * time.Second)
	for i, key := range []string{lost, unplaced} {
		_, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(i + 1)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, key)
	}
	require.Equal(t, 1, keySubmits(srv, lost))
	require.Equal(t, 1, keySubmits(srv, unplaced))

	shared.Advance(idem.DefaultResultLag)
	requireResume(t, c, idem.Summary{Visited: 2, Succeeded: 2})
	require.Equal(t, 1, keySubmits(srv, lost), "the lost answer's order, found")
	require.Equal(t, 1, srv.KeyStats("", lost).Effects)
	require.Equal(t, 2, keySubmits(srv, unplaced), "the unplaced order, resent once")
	require.Equal(t, 1, srv.KeyStats("", unplaced).Effects)
	for _, key := range []string{lost, unplaced} {
		st := srv.KeyStats("", key)
		require.Zero(t, st.SubmitsAfterFinal+st.Refusals, "%s: nothing sent again once placed: %+v", key, st)
	}
}

// The restarted service of TestLagFromASlowClockSteppedRightAtRestart,
// its clock still five minutes slow when it started (its Resume at
// start-up only asked: the crashed process's send counts from the
// restart), and stepped right just after, as chrony's makestep lands
// seconds into the boot. Counted from the restart by the wall clock, the
// lag looked over at the next visit, and Binance's read path, still up
// to about a minute behind (dev.binance.vision FAQ), answered -2013 for
// the filled order: resent, two orders. The step since the restart is
// taken back: that visit only asks, and the one after the lag finds the
// order.
func TestLagFromASlowClockSteppedJustAfterRestart(t *testing.T) {
	shared, clk := slowBootClock()
	srv, key, reopen := crashedWithALostOrder(t, shared, clk)

	shared.Advance(20 * time.Second)
	c := reopen()
	requireResume(t, c, idem.Summary{Visited: 1, Unknown: 1})
	requireOrders(t, srv, key, 1, 1)

	stepRightThenResumeOnlyAsks(t, shared, clk, c, srv, key)

	shared.Advance(idem.DefaultResultLag)
	requireFirstOrderFound(t, c, srv, key)
}
