package idem_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A service started at boot with its clock ten minutes fast sent an
// order (its answer lost) to a server that keeps keys half an hour
// (Fiber's idempotency middleware, KeyRetentionFiber) and then answered
// 503 for longer than that; chrony's makestep (or ntpd -g) set the clock
// back seconds after the send. Thirty-one minutes on, by the stepped
// clock the key was twenty-one minutes old, inside the resend window, and
// Resume resent it: the server had forgotten the key, and placed the
// order again. Run's measure catches such a step only after its first
// hour, and the checks of an earlier process's clock do not apply to
// this one's own sends. A step back since the send now counts against
// the key's age: flagged for a person, one order.
func TestKeyWindowAcrossAWallClockSteppedBackAfterTheSend(t *testing.T) {
	shared, clk, srv, c := fastBootFiber(t)
	submitLostThenRefused(t, srv, c)

	clk.offset.Store(0)
	shared.Advance(31 * time.Minute)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	require.Len(t, srv.Requests(), idem.DefaultMaxAttempts, "not resent")
	require.Equal(t, 1, srv.Effects("", "k"))
	require.Equal(t, idem.Summary{Visited: 1, Review: 1}, sum)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.ReviewClockStepped, op.Review)
}

// The same service, its clock set back before the order was sent: the
// key's age by the stepped clock is its age, and twenty minutes on, the
// server up again and keeping the key, Resume resends it and the server
// replays the order. A step the send's reading shows came before it does
// not cut the window short.
func TestKeyWindowAfterAWallClockSteppedBackBeforeTheSend(t *testing.T) {
	shared, clk, srv, c := fastBootFiber(t)
	requireResume(t, c, idem.Summary{}) // the first call: born by the fast clock
	clk.offset.Store(0)
	shared.Advance(10 * time.Second)
	submitLostThenRefused(t, srv, c)

	shared.Advance(20 * time.Minute)
	requireResume(t, c, idem.Summary{Visited: 1, Succeeded: 1})
	require.Len(t, srv.Requests(), idem.DefaultMaxAttempts+1, "resent once, replayed")
	require.Equal(t, 1, srv.Effects("", "k"))
}

// fastBootFiber is a client whose clock runs ten minutes fast, as it
// reads at boot before chrony's makestep, of a server on the true time,
// shared, that keeps keys half an hour (KeyRetentionFiber).
func fastBootFiber(t *testing.T) (*idemtest.Clock, *monotonicSkewedClock, *idemtest.Server, *idem.Client) {
	t.Helper()
	shared := idemtest.NewClock(epoch)
	clk := &monotonicSkewedClock{skewedClock: skewedClock{Clock: shared}, start: shared.Now()}
	clk.offset.Store(int64(10 * time.Minute))
	srv := newServer(t, idemtest.WithClock(shared.Now), idemtest.WithRetention(idem.KeyRetentionFiber))
	c, err := idem.Open(filepath.Join(t.TempDir(), "j"),
		idem.WithHTTPClient(srv.Client()), idem.WithClock(clk), idem.WithKeyRetention(idem.KeyRetentionFiber))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return shared, clk, srv, c
}

// submitLostThenRefused submits key k: the server places the order and
// the answer is lost, then it answers 503 to each resend of the call.
func submitLostThenRefused(t *testing.T, srv *idemtest.Server, c *idem.Client) {
	t.Helper()
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", Count: idem.DefaultMaxAttempts - 1}))
	_, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Len(t, srv.Requests(), idem.DefaultMaxAttempts, "the order, then a 503 for each resend")
	require.Equal(t, 1, srv.Effects("", "k"))
	for _, r := range srv.Requests() {
		require.Equal(t, "k", r.Key, "%s %s carries the key", r.Method, r.Path)
	}
}
