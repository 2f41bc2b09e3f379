package idem_test

// Terminal is final (promise 5): once an operation is succeeded or failed,
// by an answer or by hand, no request goes out for its key and it settles
// only once.

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// sleepHookClock is the env's manual clock, with fn run (once) at the
// first Sleep: something that happens while the caller waits.
type sleepHookClock struct {
	*idemtest.Clock
	once sync.Once
	fn   func()
}

func (c *sleepHookClock) Sleep(ctx context.Context, d time.Duration) error {
	c.once.Do(c.fn)
	return c.Clock.Sleep(ctx, d)
}

// Promise 5: after succeeded/failed, zero requests for the key, whoever
// asks: Submit again, Do, Resume.
func TestTerminalIsFinalForEveryEntryPoint(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "d"}))
	_, err := e.client.Submit(e.ctx, e.req("s", `{}`))
	require.NoError(t, err)
	_, err = e.client.Submit(e.ctx, e.req("d", `{}`))
	require.ErrorIs(t, err, idem.ErrFailed)
	before := len(e.srv.Requests())

	for _, k := range []string{"s", "d"} {
		_, _ = e.client.Submit(e.ctx, e.req(k, `{}`))
		op, err := e.client.Lookup(e.ctx, idem.DefaultScope, k)
		require.NoError(t, err)
		_, _ = e.client.Do(e.ctx, op)
	}
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Visited)
	require.Len(t, e.srv.Requests(), before, "a request went out for a settled key")
}

// Promise 5: terminal is final: after succeeded/failed, zero requests for
// that key. An operator resolves the operation while a caller is in backoff
// after a 409; when the wait ended the caller still sent a result query
// for the resolved key (query() sent first and journaled after).
func TestNoRequestAfterManualResolution(t *testing.T) {
	e := submitResolvedInBackoff(t)
	require.Zero(t, e.queries("k"), "a request went out for a key already resolved by hand")
}

// submitResolvedInBackoff submits "k" against a server that answers 409
// with Retry-After: 2; while the caller waits, an operator resolves the
// operation as failed. It checks that Submit returns the resolution.
func submitResolvedInBackoff(t *testing.T) *env {
	t.Helper()
	var e *env
	clk := &sleepHookClock{}
	e = newEnv(t,
		script(step{status: http.StatusConflict, header: http.Header{"Retry-After": {"2"}}}),
		clientOpts(idem.WithClock(clk)))
	clk.Clock = e.clock // the client reads its clock only once calls start
	clk.fn = func() {
		_, err := e.client.Resolve(context.Background(), idem.DefaultScope, "k",
			idem.Resolution{State: idem.StateFailed, Reason: "refunded by phone", By: "ops", Force: true}) // during the drive's wait, on purpose
		require.NoError(t, err)
	}
	res, _ := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NotNil(t, res)
	require.Equal(t, idem.StateFailed, res.State)
	return e
}

// Hooks.Settle "is called when an operation becomes succeeded or failed".
// A manual resolution during a drive fired it twice: once in Resolve, once
// more when the drive notices the record became terminal (drive's
// wasOpen && !d.rec.Open()). Metrics double-counted.
func TestSettleHookOncePerSettlement(t *testing.T) {
	var e *env
	settles := 0
	clk := &sleepHookClock{}
	e = newEnv(t,
		script(step{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"2"}}}),
		clientOpts(idem.WithClock(clk), idem.WithHooks(idem.Hooks{Settle: func(context.Context, *idem.Result) { settles++ }})))
	clk.Clock = e.clock
	clk.fn = func() {
		_, err := e.client.Resolve(context.Background(), idem.DefaultScope, "k",
			idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_x", Reason: "seen in dashboard", By: "ops", Force: true}) // during the drive's wait, on purpose
		require.NoError(t, err)
	}
	_, _ = e.client.Submit(e.ctx, e.req("k", `{}`))
	require.Equal(t, 1, settles)
}
