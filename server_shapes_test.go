package idem_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// How servers other than ours answer: each test is a shape met in real
// Idempotency-Key middlewares, and each failed on the client before the
// judge in decide.go learnt it.

var replayedHeader = http.Header{"Idempotent-Replayed": {"true"}}

// keyReused is the wording of the IETF draft's 422 and of common
// middlewares: it names the idempotency key.
const keyReused = `{"type":"https://example.com/idempotency","title":"Idempotency-Key reused with a different payload"}`

// Someone else's request holds the key: ours gets 409 while it runs, then
// 422 once it is stored. Nothing of ours ever executed, so the 422 is the
// answer: failed, ErrKeyConflict, and no further request.
func TestInFlightThenKeyConflictFails(t *testing.T) {
	e := newEnv(t, script(
		step{status: http.StatusConflict, header: http.Header{"Retry-After": {"1"}}},
		step{status: http.StatusUnprocessableEntity, body: keyReused},
	))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateFailed, res.State)
	require.Equal(t, 2, e.script.posts, "submits")
	require.Zero(t, e.queries("k"), "a query would have read the other request's result")

	// Nothing left to do: a restart sends nothing.
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Visited)
	require.Equal(t, 2, e.script.posts)
}

// A server that stores a handler's error answer replays it for the key's
// life: resending can never change it.
func TestReplayedErrorIsFinal(t *testing.T) {
	t.Run("stored 500: review at once, never resent", func(t *testing.T) {
		e := newEnv(t, noResultEndpoint(), script(
			step{status: http.StatusInternalServerError},
			step{status: http.StatusInternalServerError, header: replayedHeader},
		))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.ErrorIs(t, err, idem.ErrNeedsReview)
		require.Equal(t, idem.StateUnknown, res.State)
		require.Contains(t, res.Review, "stored 500")
		require.Equal(t, 2, e.script.posts)

		// Neither a restart nor the reconciler nor the caller resends it.
		e.restart()
		sum, err := e.client.Resume(e.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, sum.Review)
		op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
		require.NoError(t, err)
		_, err = e.client.Do(e.ctx, op)
		require.ErrorIs(t, err, idem.ErrNeedsReview)
		require.Equal(t, 2, e.script.posts, "resent after the server's final answer")
	})
	t.Run("stored 500 with a result endpoint: still queried", func(t *testing.T) {
		e := newEnv(t, script(
			step{forward: true, status: http.StatusBadGateway},
			step{status: http.StatusInternalServerError, header: replayedHeader},
		))
		// The query after the 502 finds nothing yet (replica lag); the
		// resend meets the stored 500; the next query settles it.
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: "k", Delay: time.Second}))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Empty(t, res.Review, "settled by the result endpoint")
		require.Equal(t, 2, e.script.posts)
		require.Equal(t, 1, e.srv.Effects(scope, "k"))
	})
	t.Run("stored 409 after a lost response: failed", func(t *testing.T) {
		e := newEnv(t, noResultEndpoint(), script(
			step{status: http.StatusBadGateway},
			step{status: http.StatusConflict, header: replayedHeader, body: `{"error":"order already exists for this cart"}`},
		))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.StateFailed, res.State)
		require.True(t, res.Replayed)
		require.Contains(t, res.Reason, "order already exists")
		require.Equal(t, 2, e.script.posts)
	})
	t.Run("stored 503: not throttling, review", func(t *testing.T) {
		e := newEnv(t, noResultEndpoint(), script(
			step{status: http.StatusBadGateway},
			step{status: http.StatusServiceUnavailable, header: replayedHeader},
		))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrNeedsReview)
		require.Contains(t, res.Review, "stored 503")
		require.Equal(t, 2, e.script.posts)
	})
}

// A middleware that does not compare bodies replays the first request's
// stored answer to any request with its key. To an operation nothing of
// which can have executed, that answer is someone else's.
func TestSilentReplayOfAnotherRequest(t *testing.T) {
	e := newEnv(t, script(step{status: http.StatusCreated, header: replayedHeader,
		body: `{"state":"succeeded","resourceId":"ord_someone_elses"}`}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "journaled and open: for a person")
	require.Equal(t, idem.StateUnknown, res.State)
	require.Empty(t, res.ResourceID)
	require.Equal(t, idem.ReviewKeyInUse, res.Review)
	require.Equal(t, 1, e.script.posts)
	require.Zero(t, e.queries("k"), "the result endpoint would report the other request's result")

	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	require.Equal(t, 1, e.script.posts)
	require.Zero(t, e.queries("k"))
}

// The default key window is shorter than common servers' defaults: a
// server that forgets keys after 30 minutes (Fiber's default) is never
// sent a key it has forgotten.
func TestDefaultKeyWindowIsSafe(t *testing.T) {
	e := newEnv(t, noResultEndpoint(), serverOpts(idemtest.WithRetention(idem.KeyRetentionFiber)),
		clientOpts(idem.WithMaxAttempts(1)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	e.clock.Advance(time.Hour)
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	require.Len(t, e.submits("k"), 1, "resent after the server forgot the key")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.Equal(t, idem.ReviewKeyExpired, e.record("k").Review)
}

// A host with a documented longer window is resent within it.
func TestHostKeyWindow(t *testing.T) {
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithMaxAttempts(1)))
	u, err := url.Parse(e.srv.URL)
	require.NoError(t, err)
	e.opts = append(e.opts, idem.WithHostKeyRetention(u.Host, idem.KeyRetentionStripe))
	e.restart()
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err = e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	e.clock.Advance(time.Hour)
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded)
	require.Len(t, e.submits("k"), 2, "resent with the same key inside the host's window")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// A 2xx that names another key proves nothing about this one; the
// decoder sees the key and the request to tell.
func TestResultTiedToRequest(t *testing.T) {
	t.Run("body names another key", func(t *testing.T) {
		e := newEnv(t, script(step{forward: true, status: http.StatusCreated,
			body: `{"state":"succeeded","resourceId":"ord_wrong","key":"another-key"}`}))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		require.NotEqual(t, "ord_wrong", res.ResourceID)
		require.NotEmpty(t, res.ResourceID)
		require.Equal(t, 1, e.queries("k"), "the answer was checked by key")
	})
	// An answer whose Idempotency-Key header (Stripe's answers carry
	// the request's) names another key is another request's answer: a
	// proxy or a pooled connection mixed two exchanges up, or a cache
	// that keys on the URL alone replayed another caller's. Whatever the
	// decoder makes of its body.
	t.Run("header names another key", func(t *testing.T) {
		e := newEnv(t, script(step{forward: true, status: http.StatusCreated,
			header: http.Header{"Idempotency-Key": {"another-key"}}, body: `{"id":"ord_wrong","status":"succeeded"}`}))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		require.NotEqual(t, "ord_wrong", res.ResourceID)
		require.NotEmpty(t, res.ResourceID)
		require.Equal(t, 1, e.queries("k"), "the answer was checked by key")
		require.Equal(t, 1, e.srv.Effects(scope, "k"))
	})
	for _, tc := range []struct {
		name, echo string
		format     idem.KeyFormat
	}{
		{"header names this key", "k", idem.KeyBare},
		{"header names this key as sent, quoted", ` "k"`, idem.KeyQuoted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, clientOpts(idem.WithKeyHeader(idem.DefaultKeyHeader, tc.format)),
				script(step{forward: true, status: http.StatusCreated,
					header: http.Header{"Idempotency-Key": {tc.echo}}, body: `{"id":"ord_1","status":"succeeded"}`}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.NoError(t, err)
			require.Equal(t, "ord_1", res.ResourceID)
			require.Zero(t, e.queries("k"), "the answer is this request's")
		})
	}
	t.Run("decoder sees key, request and replay", func(t *testing.T) {
		var seen []idem.Answer
		e := newEnv(t, clientOpts(idem.WithDecoder(func(a *idem.Answer) (idem.Outcome, error) {
			seen = append(seen, *a)
			return idem.DecodeJSON(a)
		})))
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.GarbageBody, Key: "k"}))
		_, err := e.client.Submit(e.ctx, e.req("k", `{"amount":1}`))
		require.NoError(t, err)
		require.Len(t, seen, 2, "the garbage submit answer and the query's")
		for i, a := range seen {
			require.Equal(t, "k", a.Key)
			require.Equal(t, idem.DefaultScope, a.Scope)
			require.Equal(t, `{"amount":1}`, string(a.RequestBody))
			require.Equal(t, http.MethodPost, a.Method)
			require.Equal(t, i == 1, a.Query)
			require.NotNil(t, a.Header)
		}
	})
}

// Error kinds: a server's own status for a reused key maps to
// ErrKeyConflict; a 422 that is a plain validation error does not.
func TestKeyConflictStatuses(t *testing.T) {
	t.Run("417 named with WithKeyConflictStatus", func(t *testing.T) {
		e := newEnv(t, clientOpts(idem.WithKeyConflictStatus(http.StatusExpectationFailed)),
			script(step{status: http.StatusExpectationFailed, body: `{"error":"request differs"}`}))
		_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrKeyConflict)
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, 1, e.script.posts)
	})
	t.Run("422 validation error is a plain failure", func(t *testing.T) {
		e := newEnv(t, script(step{status: http.StatusUnprocessableEntity, body: `{"error":"amount must be positive"}`}))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrFailed)
		require.NotErrorIs(t, err, idem.ErrKeyConflict)
		require.Contains(t, res.Reason, "amount must be positive")
	})
	t.Run("journal conflict with an open operation: nothing of this call journaled", func(t *testing.T) {
		e := newEnv(t, clientOpts(idem.WithMaxAttempts(1)))
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
		_, err := e.client.Submit(e.ctx, e.req("k", `{"a":1}`))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		res, err := e.client.Submit(e.ctx, e.req("k", `{"a":2}`))
		require.Nil(t, res)
		require.ErrorIs(t, err, idem.ErrKeyConflict)
		require.NotErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrFailed)
	})
	t.Run("WithKeyConflictStatus refuses a non-4xx status", func(t *testing.T) {
		e := newEnv(t)
		_, err := idem.New(e.replica(), idem.WithKeyConflictStatus(500))
		require.ErrorContains(t, err, "not a 4xx")
	})
}

// A refusal after an attempt that may have executed is ambiguous, but the
// same refusal again and again is the server's answer: flag it rather
// than resend until the reconciliation deadline.
func TestRefusalsAfterMaybeExecutedEndInReview(t *testing.T) {
	steps := []step{{status: http.StatusBadGateway}}
	for range 10 {
		steps = append(steps, step{status: http.StatusUnprocessableEntity, body: keyReused})
	}
	e := newEnv(t, noResultEndpoint(), script(steps...), clientOpts(idem.WithMaxAttempts(10)))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)
	require.Equal(t, 4, e.script.posts, "one 502, then three refusals")
}

// A key that answers 409 for longer than a server keeps keys, with
// nothing of ours ever executed, is not resent for ever: once the window
// has passed it is flagged as another request's key.
func TestEndlessInFlightKeyIsFlagged(t *testing.T) {
	var steps []step
	for range 20 {
		steps = append(steps, step{status: http.StatusConflict, header: http.Header{"Retry-After": {"1"}}})
	}
	e := newEnv(t, script(steps...))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	sent := e.script.posts

	e.clock.Advance(idem.DefaultKeyRetention)
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	require.Equal(t, idem.ReviewKeyInUse, e.record("k").Review)
	require.Equal(t, sent, e.script.posts, "resent after the key window")
	require.Zero(t, e.queries("k"))
}
