package idem_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A caller whose context ends as the server answers "429 Too Many
// Requests, Retry-After: 31" (an HTTP handler's deadline, a client gone)
// leaves its operation to the reconciler. The server's wait still holds:
// RFC 6585 section 4 and RFC 9110 section 10.2.3 ask the client not to
// send again before it ends, as a hand-off does (TestHandOffHonoursLong
// RetryAfter). The operation was left due at once, and Run's next pass,
// five seconds on, sent it again into the same limit. Default settings
// but the clock.
func TestStoppedCallerKeepsTheServersRetryAfter(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	until := epoch.Add(30 * time.Second)
	srv := newOrderAPI(t, clock, throttling(http.StatusTooManyRequests, until))
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	c, err := idem.New(store, idem.WithHTTPClient(srv.srv.Client()), idem.WithClock(clock),
		idem.WithHooks(idem.Hooks{Attempt: func(context.Context, idem.AttemptEvent) { stop() }}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	res, err := c.Submit(ctx, idem.Request{Key: "k", URL: srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, idem.StatePending, res.State, "a 429 did not execute")
	require.Equal(t, 1, srv.received(), "submits")
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.False(t, rec.NextDue.Before(until), "NextDue %v: before the server's Retry-After ends (%v)", rec.NextDue, until)

	// The server refuses whatever comes before its wait ends: a second
	// refusal is a resend too early.
	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	runUntil(t, e, until.Add(2*time.Minute))
	rec, err = store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	refused, orders := srv.counts()
	require.Equal(t, 1, refused, "submits refused: sent before the server's Retry-After ended")
	require.Equal(t, 1, orders["k"], "orders")
	require.Equal(t, 2, srv.received(), "submits")
}
