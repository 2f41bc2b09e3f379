package idem_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name      string
		fault     idemtest.Fault
		opts      []idem.Option
		wantSleep time.Duration
	}{
		{"delta-seconds longer than backoff", idemtest.Fault{Kind: idemtest.Throttle, RetryAfter: 7 * time.Second}, nil, 7 * time.Second},
		{"HTTP-date", idemtest.Fault{Kind: idemtest.Unavailable, RetryAfter: 9 * time.Second, HTTPDate: true}, nil, 9 * time.Second},
		{"shorter than backoff: backoff wins", idemtest.Fault{Kind: idemtest.Throttle, RetryAfter: time.Second}, nil, 2 * time.Second},
		{"capped", idemtest.Fault{Kind: idemtest.Unavailable, RetryAfter: time.Hour},
			[]idem.Option{idem.WithRetryAfterCap(5 * time.Second)}, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, clientOpts(tt.opts...))
			f := tt.fault
			f.Key = "k"
			require.NoError(t, e.srv.Inject(f))
			res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, []time.Duration{tt.wantSleep}, e.clock.Sleeps())
			require.Len(t, e.submits("k"), 2)
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
		})
	}
}

func TestGarbageRetryAfterIgnored(t *testing.T) {
	for _, v := range []string{"soon", "-5", "Mon, 99 Foo 2026", "99999999999999999999999"} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, script(step{status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {v}}}),
				clientOpts(idem.WithRetryAfterCap(10*time.Second)))
			_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.NoError(t, err)
			for _, d := range e.clock.Sleeps() {
				require.LessOrEqual(t, d, 10*time.Second, "a hostile Retry-After is capped")
				require.GreaterOrEqual(t, d, 2*time.Second, "never shorter than the backoff")
			}
		})
	}
}

// A hostile Retry-After (absurd delta-seconds, a date decades away)
// never parks a caller beyond the cap, and garbage is ignored.
func TestHostileRetryAfterIsCapped(t *testing.T) {
	for _, ra := range []string{"99999999999999999999999", "Fri, 01 Jan 2100 00:00:00 GMT", "-5", "1e9", strings.Repeat("9", 200)} {
		t.Run(ra[:min(len(ra), 20)], func(t *testing.T) {
			e := newEnv(t, clientOpts(idem.WithMaxElapsed(time.Hour)),
				script(step{status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {ra}}}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			for _, s := range e.clock.Sleeps() {
				require.LessOrEqual(t, s, idem.DefaultRetryAfterCap)
			}
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
		})
	}
}

func TestDefaultBackoffIsJittered(t *testing.T) {
	e2 := newEnv(t, script(
		step{status: http.StatusServiceUnavailable}, step{status: http.StatusServiceUnavailable}, step{status: http.StatusServiceUnavailable}))
	// Rebuild the client without the test's constant backoff.
	c, err := idem.New(e2.replica(), idem.WithHTTPClient(&http.Client{Transport: e2.script}), idem.WithClock(e2.clock))
	require.NoError(t, err)
	_, err = c.Submit(e2.ctx, e2.req("k", `{}`))
	require.NoError(t, err)
	sleeps := e2.clock.Sleeps()
	require.Len(t, sleeps, 3)
	interval := idem.DefaultInitialInterval
	for i, d := range sleeps {
		lo := time.Duration(float64(interval) * (1 - idem.DefaultJitter))
		hi := time.Duration(float64(interval) * (1 + idem.DefaultJitter))
		require.GreaterOrEqualf(t, d, lo, "wait %d", i)
		require.LessOrEqualf(t, d, hi, "wait %d", i)
		interval = time.Duration(float64(interval) * idem.DefaultMultiplier)
	}
}

func TestRetryAfterBeyondBudgetHandsOff(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxElapsed(10*time.Second)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, Key: "k", RetryAfter: 30 * time.Second}))
	start := e.clock.Now()
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":3}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrBudgetSpent)
	// A 429 says the attempt did not execute: nothing of ours can have
	// run, so the operation stays pending, as a cancelled one does.
	require.Equal(t, idem.StatePending, res.State)
	require.Empty(t, e.clock.Sleeps(), "no sleeping past the budget")
	rec := e.record("k")
	require.Equal(t, start.Add(30*time.Second), rec.NextDue, "due when the server said")
	require.Equal(t, []byte(`{"amount":3}`), rec.Body)
	require.Len(t, e.submits("k"), 1)
}

// The Retry-After cap bounds how long a caller waits, not how long the
// reconciler leaves the server alone after a hand-off.
func TestHandOffHonoursLongRetryAfter(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxElapsed(10*time.Second), idem.WithRetryAfterCap(5*time.Second)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", RetryAfter: 20 * time.Minute, Count: 100}))
	start := e.clock.Now()
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	handedOff := e.clock.Now()
	require.True(t, handedOff.Before(start.Add(20*time.Minute)), "the caller waited only the capped time")
	require.False(t, e.record("k").NextDue.Before(handedOff.Add(20*time.Minute)),
		"due no sooner than the server's 20 minutes after the hand-off")
}

func TestBudgetSpentLeavesOperationIntact(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxAttempts(5)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 100}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":4}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrBudgetSpent)
	var ie *idem.Error
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "k", ie.Key)
	require.Equal(t, 5, ie.Attempts)
	require.Equal(t, idem.StateUnknown, res.State)
	// submit, query, submit, query, submit: five exchanges, same bytes.
	require.Len(t, e.submits("k"), 3)
	require.Equal(t, 2, e.queries("k"))
	e.requireSameBytes("k")
	require.Zero(t, e.srv.Effects(scope, "k"))

	rec := e.record("k")
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, []byte(`{"amount":4}`), rec.Body)
	require.Len(t, rec.Attempts, 5)

	// The server recovers; a restarted process settles it with the same key.
	e.srv.Reset()
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	e.requireSameBytes("k")
}

func TestCancelNeverFails(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: "k", Delay: time.Minute}))
	ctx, cancel := context.WithCancel(e.ctx)
	// Cancel once the server has committed: the response is what is lost.
	go func() {
		defer cancel()
		deadline := time.Now().Add(10 * time.Second)
		for e.srv.Effects(scope, "k") == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}()
	res, err := e.client.Submit(ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, idem.StateUnknown, res.State, "maybe sent: unknown, never failed")

	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded)
	require.Len(t, e.submits("k"), 1, "the query found it: no resend")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

func TestCancelBeforeSendStaysPending(t *testing.T) {
	e := newEnv(t)
	op, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	res, err := e.client.Do(ctx, op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, []idem.State{idem.StatePending}, res.State)
	require.Empty(t, e.srv.Requests())
}

// createHookStore runs onCreate after each Create commits.
type createHookStore struct {
	idem.Store
	onCreate func()
}

func (s *createHookStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	r, err := s.Store.Create(ctx, rec)
	if err == nil && s.onCreate != nil {
		s.onCreate()
	}
	return r, err
}

// Close/cancellation: "unknown, or pending if nothing can have been sent".
// A Submit stopped after its record (with attempt 1) was committed but
// before anything was sent left attempt 1 open: the operation was reported
// unknown, and the next start closed the attempt as "may have been sent",
// so a later legitimate refusal (a 400) could never settle it as failed.
func TestSubmitStoppedBeforeSendingStaysPending(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	c, err := idem.New(&createHookStore{Store: e.store, onCreate: cancel}, e.baseOpts()...)
	require.NoError(t, err)
	res, err := c.Submit(ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, e.srv.Requests())
	require.Equal(t, idem.StatePending, res.State, "nothing was sent")
	rec := e.record("k")
	require.Equal(t, idem.StatePending, rec.State)
	for _, a := range rec.Attempts {
		require.True(t, a.Done, "an attempt never sent is left open: it will count as maybe sent")
		require.False(t, a.Wrote)
	}
	// The next start sends it without asking first, and a refusal settles it.
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "k"}))
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Failed)
	require.Zero(t, e.queries("k"))
}

// updateHookStore runs onUpdate after each Update commits.
type updateHookStore struct {
	idem.Store
	onUpdate func()
}

func (s *updateHookStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	r, err := s.Store.Update(ctx, scope, key, fn)
	if err == nil && s.onUpdate != nil {
		s.onUpdate()
	}
	return r, err
}

// The other side of counting untraced errors as "maybe sent": a call
// stopped while its attempt was being journaled never reaches net/http, and
// must stay pending, not become unknown.
func TestDoStoppedBeforeSendingStaysPending(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	c, err := idem.New(&updateHookStore{Store: e.store, onUpdate: cancel}, e.baseOpts()...)
	require.NoError(t, err)
	op, err := c.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	res, err := c.Do(ctx, op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Empty(t, e.srv.Requests())
	require.Equal(t, idem.StatePending, res.State)
	rec := e.record("k")
	require.Len(t, rec.Attempts, 1)
	require.True(t, rec.Attempts[0].Done)
	require.False(t, rec.Attempts[0].Wrote)
}

func TestRetryBudgetStopsRetries(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithRetryBudget(4, 0.1)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Count: 100, RetryAfter: time.Second}))
	_, err := e.client.Submit(e.ctx, e.req("a", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, idem.ErrRetryBudgetEmpty)
	require.Len(t, e.submits("a"), 2, "tokens 4 → 3 → 2: one retry, then none")

	// A first attempt always goes, even with the budget empty.
	_, err = e.client.Submit(e.ctx, e.req("b", `{}`))
	require.ErrorIs(t, err, idem.ErrRetryBudgetEmpty)
	require.Len(t, e.submits("b"), 1)
}

func TestKeyRetention(t *testing.T) {
	for _, withResult := range []bool{true, false} {
		name := "result endpoint"
		var opts []envOption
		if !withResult {
			name = "replay only"
			opts = append(opts, noResultEndpoint())
		}
		t.Run(name, func(t *testing.T) {
			// The server forgets keys when idem's default window says so.
			opts := append(opts, clientOpts(idem.WithMaxAttempts(1)), serverOpts(idemtest.WithRetention(idem.DefaultKeyRetention)))
			e := newEnv(t, opts...)
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)

			// Past the window the server has forgotten the key: resending
			// would charge twice.
			e.clock.Advance(idem.DefaultKeyRetention + time.Minute)
			op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
			require.NoError(t, err)
			res, err := e.client.Do(e.ctx, op)
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.ErrorIs(t, err, idem.ErrKeyExpired)
			require.Equal(t, idem.ReviewKeyExpired, res.Review)
			require.Len(t, e.submits("k"), 1, "never resent after the key window")
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
			if withResult {
				require.Equal(t, 1, e.queries("k"), "it still asked")
			}
			flagged, err := e.client.List(e.ctx, idem.Filter{Review: true})
			require.NoError(t, err)
			require.Len(t, flagged, 1)
			require.Equal(t, "k", flagged[0].Key)
		})
	}
}

func TestReplayWithoutResultEndpoint(t *testing.T) {
	e := newEnv(t, noResultEndpoint())
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Len(t, e.submits("k"), 2, "resent with the same key; the server replayed")
	require.Zero(t, e.queries("k"))
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	e.requireSameBytes("k")
}

// A server that fails every submit before committing, with a result
// endpoint that knows nothing: each resend follows a backoff wait, so a
// struggling server never gets one submit per round trip.
func TestResendAfterInconclusiveQueryBacksOff(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 100}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State)
	submits := len(e.submits("k"))
	require.GreaterOrEqual(t, submits, 2, "it resent within the budget")
	require.Equal(t, submits-1, e.queries("k"), "a query after every failed submit but the last")
	require.Len(t, e.clock.Sleeps(), submits-1, "one backoff wait before every resend")
	require.Zero(t, e.srv.Effects(scope, "k"))
	e.requireSameBytes("k")
}
