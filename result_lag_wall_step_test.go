package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
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

// gatedClock holds Run's waits (their context carries runGate) while
// shut, so that a test acts between two of Run's passes, Run still
// running.
type gatedClock struct {
	*monotonicSkewedClock
	mu     sync.Mutex
	shut   chan struct{} // closed to open; nil while open
	parked chan struct{} // told when a wait is held
}

// runGate marks Run's context for gatedClock.
type runGate struct{}

func (c *gatedClock) Sleep(ctx context.Context, d time.Duration) error {
	if ctx.Value(runGate{}) != nil {
		c.mu.Lock()
		shut := c.shut
		c.mu.Unlock()
		if shut != nil {
			select {
			case c.parked <- struct{}{}:
			default:
			}
			select {
			case <-shut:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return c.monotonicSkewedClock.Sleep(ctx, d)
}

// hold shuts the gate and returns once Run waits at it.
func (c *gatedClock) hold(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	c.shut = make(chan struct{})
	c.mu.Unlock()
	within(t, c.parked, "Run held at its wait")
}

// open lets Run go on.
func (c *gatedClock) open() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.shut)
	c.shut = nil
}

// advanceRun waits until Run's waits have moved shared to end.
func advanceRun(t *testing.T, shared *idemtest.Clock, end time.Time) {
	t.Helper()
	// Generous: Run moves the clock pass by pass, and on a loaded
	// machine under -race (CI's packages in parallel, another job's
	// valgrind) 10 s once fell 23 minutes of clock short of two hours.
	deadline := time.Now().Add(60 * time.Second)
	for shared.Now().Before(end) {
		require.True(t, time.Now().Before(deadline), "Run's clock %v short of its end after 60s", end.Sub(shared.Now()))
		time.Sleep(time.Millisecond) // polling interval, not a condition
	}
}

// A service whose clock still read ten minutes slow after Run's first
// hour (a VM restored from a snapshot; ntpd, which steps any offset past
// 128 ms at any time unless run with -x, reached its servers only then)
// sends an order the exchange never placed (Binance's -1001 "Internal
// error", a 500 before commit), and ntpd steps the clock right, just
// after the send or just before it. Run's trusted clock, anchored on the
// slow clock, holds the step back from the lag's clock; taken back from
// a send made before it as well, the step held the order for the lag
// plus ten minutes, past the key window as the stepped clock reads it
// (DefaultKeyRetention: by then flagged, an order never placed left to
// a person), and a send made after it, which no step since ages, was
// held as long by the trusted clock alone. It is resent once the lag
// has passed since it was sent, once.
func TestResultLagAcrossAWallClockSteppedForwardWhileRunRuns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stepFirst bool
	}{
		{"stepped after the send", false},
		{"stepped before the send", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared, skewed := slowBootClock()
			skewed.offset.Store(int64(-10 * time.Minute))
			clk := &gatedClock{monotonicSkewedClock: skewed, parked: make(chan struct{}, 1)}
			key := crashtest.Key(1)
			srv, opts := openOnlyServer(t, shared, clk, nil, idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: key})
			c, err := idem.Open(filepath.Join(t.TempDir(), "j"), opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx, cancel := context.WithCancel(context.WithValue(t.Context(), runGate{}, true))
			defer cancel()
			ran := runAsync(ctx, c)
			advanceRun(t, shared, shared.Now().Add(61*time.Minute)) // Run takes its anchor
			clk.hold(t)

			if tc.stepFirst {
				skewed.offset.Store(0)
			}
			sent := shared.Now()
			_, err = c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + crashtest.OrdersPath, Body: crashtest.Body(1)})
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.Equal(t, 1, keySubmits(srv, key))
			skewed.offset.Store(0)

			clk.open()
			// Run's visits, spread by its backoff, come within minutes.
			advanceRun(t, shared, sent.Add(10*time.Minute))
			cancel()
			require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
			require.Equal(t, 2, keySubmits(srv, key), "the unplaced order, resent once")
			st := srv.KeyStats("", key)
			require.Equal(t, 1, st.Effects)
			require.Zero(t, st.SubmitsAfterFinal+st.Refusals, "%+v", st)
			op, err := c.Lookup(t.Context(), idem.DefaultScope, key)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State)
			require.Empty(t, op.Review)
		})
	}
}
