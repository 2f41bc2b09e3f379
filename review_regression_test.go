package idem_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// Contract: "Preparing the same (scope, key) again ... with a different
// request returns ErrKeyConflict", and a resubmission is only the same
// operation if it is the same request. A second Submit with the same key but
// a different body, arriving while the first is in flight, must not be told
// that *its* request succeeded: it is joined to the first call without any
// comparison and receives the first request's result.
func TestReviewJoinedSubmitWithDifferentBodyIsConflict(t *testing.T) {
	e, g := gatedEnv(t)
	first := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{"amount":100}`))
		first <- err
	}()
	waitEntered(t, g)

	second := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{"amount":999999}`))
		second <- err
	}()
	waitJoined(t, 1)
	close(g.release)

	require.NoError(t, <-first)
	err := <-second
	require.ErrorIs(t, err, idem.ErrKeyConflict,
		"a different body under the same key was reported as succeeded (got %v)", err)
}

// Contract (the problem statement, promise 3): when idem cannot tell what
// happened it says "unknown"; it never marks failed what may have executed.
// Attempt 1 reached the server and executed (a gateway answered 502). The
// resend with the same key is refused by an auth layer (401: the credential
// the request hook adds expired meanwhile). That 401 says nothing about
// attempt 1, yet the operation is settled failed: the caller, told
// ErrFailed, will retry under a new key and pay twice.
func TestReviewRejectedResendAfterMaybeExecutedIsNotFailed(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			e := newEnv(t, noResultEndpoint(),
				script(step{forward: true, status: http.StatusBadGateway}, step{status: status}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "the order was executed once")
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.NotEqual(t, idem.StateFailed, res.State, "an executed order is journaled failed")
		})
	}
}

// Same, with a result endpoint that lags (404 is not "never happened").
func TestReviewRejectedResendAfterQueryLagIsNotFailed(t *testing.T) {
	e := newEnv(t, script(step{forward: true, status: http.StatusBadGateway}, step{status: http.StatusForbidden}))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: "k", Delay: time.Hour}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State)
}

// Contract: Do/Submit return a non-nil Result, or an error, for every call;
// a (nil, nil) answer reads as success. When the caller driving a key panics
// (a user Decoder, Classifier, hook or transport; net/http's server
// recovers handler panics, so the process lives on), callers joined to it
// get (nil, nil).
func TestReviewJoinedCallerAfterLeaderPanic(t *testing.T) {
	calls := 0
	e, g := gatedEnv(t, clientOpts(idem.WithDecoder(func(a *idem.Answer) (idem.Outcome, error) {
		calls++
		if calls == 1 {
			panic("decoder bug")
		}
		return idem.DecodeJSON(a)
	})))
	first := make(chan any, 1)
	go func() {
		defer func() { first <- recover() }()
		_, _ = e.client.Submit(e.ctx, e.req("k", `{}`))
	}()
	waitEntered(t, g)
	type out struct {
		res *idem.Result
		err error
	}
	second := make(chan out, 1)
	go func() {
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		second <- out{res, err}
	}()
	waitJoined(t, 1)
	close(g.release)
	require.NotNil(t, <-first, "the leader panicked")
	o := <-second
	require.False(t, o.res == nil && o.err == nil, "joined caller got (nil, nil): reads as success")
}

// Promise 5: terminal is final: after succeeded/failed, zero requests for
// that key. An operator resolves the operation while a caller is in backoff
// after a 409; when the wait ends the caller still sends a result query
// for the resolved key (query() sends first and journals after).
func TestReviewNoRequestAfterManualResolution(t *testing.T) {
	var e *env
	clk := &sleepHookClock{}
	e = newEnv(t,
		script(step{status: http.StatusConflict, header: http.Header{"Retry-After": {"2"}}}),
		clientOpts(idem.WithClock(clk)))
	clk.Clock = e.clock // the client reads its clock only once calls start
	clk.fn = func() {
		_, err := e.client.Resolve(context.Background(), idem.DefaultScope, "k",
			idem.Resolution{State: idem.StateFailed, Reason: "refunded by phone", By: "ops"})
		require.NoError(t, err)
	}
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NotNil(t, res)
	require.Equal(t, idem.StateFailed, res.State)
	_ = err
	require.Zero(t, e.queries("k"), "a request went out for a key already resolved by hand")
}

// Hooks.Settle "is called when an operation becomes succeeded or failed".
// A manual resolution during a drive fires it twice: once in Resolve, once
// more when the drive notices the record became terminal (drive's
// wasOpen && !d.rec.Open()). Metrics double-count.
func TestReviewSettleHookOncePerSettlement(t *testing.T) {
	var e *env
	settles := 0
	clk := &sleepHookClock{}
	e = newEnv(t,
		script(step{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"2"}}}),
		clientOpts(idem.WithClock(clk), idem.WithHooks(idem.Hooks{Settle: func(*idem.Result) { settles++ }})))
	clk.Clock = e.clock
	clk.fn = func() {
		_, err := e.client.Resolve(context.Background(), idem.DefaultScope, "k",
			idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_x", Reason: "seen in dashboard", By: "ops"})
		require.NoError(t, err)
	}
	_, _ = e.client.Submit(e.ctx, e.req("k", `{}`))
	require.Equal(t, 1, settles)
}

// Key placement / result endpoint: the result URL is "derived from the
// key". A legal key of "." or ".." (checkName accepts any visible ASCII)
// is dot-segment-resolved away by url.ResolveReference, so the result
// query goes to another resource (the collection, or the API root). A 2xx
// there with any "id" field decodes as succeeded: a lost order.
func TestReviewDotKeysKeepTheirResultURL(t *testing.T) {
	for _, key := range []string{".", ".."} {
		t.Run(key, func(t *testing.T) {
			e := newEnv(t)
			op, err := e.client.Prepare(e.ctx, e.req(key, `{}`))
			if errors.Is(err, idem.ErrInvalidRequest) {
				return // rejecting such keys is a fine fix too
			}
			require.NoError(t, err)
			prefix := e.srv.URL + "/operations/"
			require.True(t, strings.HasPrefix(op.ResultURL, prefix) && len(op.ResultURL) > len(prefix),
				"key %q queries %q, not its own result", key, op.ResultURL)
		})
	}
}

// "Two callers in one process with the same key never have two requests in
// flight: the second joins the first." Joining must not import the first
// caller's cancellation: the second caller's context is alive and its
// budget untouched, yet it is handed context.Canceled and an unknown
// outcome because somebody else gave up.
func TestReviewJoinedCallerNotCancelledByLeader(t *testing.T) {
	e, g := gatedEnv(t)
	lctx, cancel := context.WithCancel(e.ctx)
	first := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(lctx, e.req("k", `{}`))
		first <- err
	}()
	waitEntered(t, g)
	second := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		second <- err
	}()
	waitJoined(t, 1)
	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
	close(g.release) // later submits pass
	err := <-second
	require.NotErrorIs(t, err, context.Canceled, "the joined caller inherited another caller's cancellation")
}
