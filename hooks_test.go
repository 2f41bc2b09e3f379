package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// ctxTag marks the context a test passes, so a hook can show it got it.
type ctxTag struct{}

// hookLog counts every hook's events and the contexts they came with.
type hookLog struct {
	mu                                      sync.Mutex
	calls, ends, attempts, settles, reviews int
	handoffs, runErrs                       int
	untagged                                []string // hooks that got a context without the tag
	kinds, traces                           []string
	settled                                 chan *idem.Result
}

func newHookLog() *hookLog { return &hookLog{settled: make(chan *idem.Result, 16)} }

func (h *hookLog) tagged(ctx context.Context, hook string) {
	if ctx.Value(ctxTag{}) == nil {
		h.untagged = append(h.untagged, hook)
	}
}

func (h *hookLog) hooks() idem.Hooks {
	return idem.Hooks{
		Trace: func(ctx context.Context) string {
			s, _ := ctx.Value(ctxTag{}).(string)
			return "trace-of-" + s
		},
		Call: func(ctx context.Context, ev idem.CallEvent) (context.Context, func(*idem.Result, error)) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.tagged(ctx, "call")
			h.calls++
			h.kinds, h.traces = append(h.kinds, ev.Kind), append(h.traces, ev.Trace)
			return ctx, func(*idem.Result, error) {
				h.mu.Lock()
				defer h.mu.Unlock()
				h.ends++
			}
		},
		Attempt: func(ctx context.Context, _ idem.AttemptEvent) { h.count(ctx, "attempt", &h.attempts) },
		Settle: func(ctx context.Context, r *idem.Result) {
			h.count(ctx, "settle", &h.settles)
			h.settled <- r
		},
		Review:   func(ctx context.Context, _ *idem.Result) { h.count(ctx, "review", &h.reviews) },
		Handoff:  func(ctx context.Context, _ *idem.Result) { h.count(ctx, "handoff", &h.handoffs) },
		RunError: func(ctx context.Context, _ error) { h.count(ctx, "run error", &h.runErrs) },
	}
}

func (h *hookLog) count(ctx context.Context, hook string, n *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tagged(ctx, hook)
	*n++
}

// counts is what the hooks saw: calls, ends, attempts, settles, reviews,
// hand-offs, Run errors.
type counts struct{ calls, ends, attempts, settles, reviews, handoffs, runErrs int }

func (h *hookLog) counts() counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return counts{h.calls, h.ends, h.attempts, h.settles, h.reviews, h.handoffs, h.runErrs}
}

func tagged(ctx context.Context, s string) context.Context {
	return context.WithValue(ctx, ctxTag{}, s)
}

func TestHooksReportEachEventOnce(t *testing.T) {
	t.Run("settled after a lost response", func(t *testing.T) {
		h := newHookLog()
		e := newEnv(t, clientOpts(idem.WithHooks(h.hooks())))
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
		_, err := e.client.Submit(tagged(e.ctx, "caller"), e.req("k", `{}`))
		require.NoError(t, err)
		got := h.counts()
		require.Equal(t, counts{calls: 1, ends: 1, attempts: len(e.srv.Requests()), settles: 1}, got)
		require.Equal(t, 2, got.attempts, "a submit and a query")
		require.Empty(t, h.untagged, "hooks without the caller's context")
		require.Equal(t, "trace-of-caller", e.record("k").Trace)

		// A call on a settled operation drives nothing and reports nothing.
		op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
		require.NoError(t, err)
		_, err = e.client.Do(tagged(e.ctx, "again"), op)
		require.NoError(t, err)
		require.Equal(t, got, h.counts())
	})

	t.Run("handed off, then settled by Run", func(t *testing.T) {
		h := newHookLog()
		e := newEnv(t, clientOpts(idem.WithHooks(h.hooks()), idem.WithMaxAttempts(2),
			idem.WithReconcile(time.Second, time.Minute, 72*time.Hour)))
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", Count: 2}))
		_, err := e.client.Submit(tagged(e.ctx, "caller"), e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.Equal(t, counts{calls: 1, ends: 1, attempts: 2, handoffs: 1}, h.counts())

		ctx, cancel := context.WithTimeout(tagged(e.ctx, "run"), 20*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { defer close(done); _ = e.client.Run(ctx) }()
		// Not Wait: its poll would move the manual clock past the key window.
		select {
		case res := <-h.settled:
			require.Equal(t, idem.StateSucceeded, res.State)
		case <-ctx.Done():
			t.Fatal("Run did not settle the operation")
		}
		cancel()
		<-done
		got := h.counts()
		require.Equal(t, len(e.srv.Requests()), got.attempts, "attempt events vs the server's log")
		require.Equal(t, counts{calls: got.calls, ends: got.ends, attempts: got.attempts, settles: 1, handoffs: 1}, got)
		require.Equal(t, got.calls, got.ends)
		require.Empty(t, h.untagged)
		h.mu.Lock()
		defer h.mu.Unlock()
		require.Equal(t, "reconcile", h.kinds[len(h.kinds)-1])
		require.Equal(t, "trace-of-caller", h.traces[len(h.traces)-1], "a Run visit sees the caller's trace")
	})

	t.Run("flagged once, settled by hand", func(t *testing.T) {
		h := newHookLog()
		e := newEnv(t, clientOpts(idem.WithHooks(h.hooks()),
			idem.WithReconcile(time.Second, time.Minute, time.Hour)))
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 1000}))
		_, err := e.client.Submit(tagged(e.ctx, "caller"), e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		e.clock.Advance(2 * time.Hour)

		ctx, cancel := context.WithTimeout(tagged(e.ctx, "run"), 20*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { defer close(done); _ = e.client.Run(ctx) }()
		res, err := e.client.Wait(ctx, "", "k")
		require.NoError(t, err)
		require.Equal(t, idem.ReviewDeadlinePassed, res.Review)
		// The daily recheck of a flagged operation is no new flagging.
		queries := e.queries("k")
		e.clock.Advance(25 * time.Hour)
		require.Eventually(t, func() bool { return e.queries("k") > queries }, 15*time.Second, time.Millisecond)
		cancel()
		<-done
		require.Equal(t, 1, h.counts().reviews)

		_, err = e.client.Resolve(tagged(e.ctx, "operator"), "", "k",
			idem.Resolution{State: idem.StateFailed, Reason: "never reached the server", By: "ops"})
		require.NoError(t, err)
		got := h.counts()
		require.Equal(t, 1, got.settles, "Resolve settles once")
		require.Equal(t, 1, got.handoffs)
		require.Zero(t, got.runErrs)
		require.Equal(t, len(e.srv.Requests()), got.attempts)
		require.Empty(t, h.untagged)
	})
}

func TestHooksRunError(t *testing.T) {
	h := newHookLog()
	e := newEnv(t)
	fs := &faultyStore{Store: e.store}
	fs.failDue(errNoSpace, 3)
	c, err := idem.New(fs, append(e.baseOpts(), idem.WithHooks(h.hooks()))...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(tagged(e.ctx, "run"), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	require.Eventually(t, func() bool { return c.Health().LastPass.After(epoch) }, 15*time.Second, time.Millisecond)
	cancel()
	<-done
	require.Equal(t, 3, h.counts().runErrs, "one per failed pass")
	require.Empty(t, h.untagged)
}

// blockingClock is a manual clock whose Sleep never ends by itself: a Wait
// that returns proves it was woken, not that it polled.
type blockingClock struct{ *idemtest.Clock }

func (blockingClock) Sleep(ctx context.Context, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestWait(t *testing.T) {
	t.Run("woken by a settlement in this process", func(t *testing.T) {
		e := newEnv(t)
		c, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithClock(blockingClock{e.clock}))...)
		require.NoError(t, err)
		op, err := c.Prepare(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		got := make(chan *idem.Result, 1)
		go func() {
			res, _ := c.Wait(e.ctx, op.Scope, op.Key)
			got <- res
		}()
		_, err = c.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, Reason: "seen in dashboard", By: "ops"})
		require.NoError(t, err)
		select {
		case res := <-got:
			require.Equal(t, idem.StateSucceeded, res.State)
		case <-time.After(time.Minute):
			t.Fatal("Wait was not woken by Resolve")
		}
	})

	t.Run("a settlement by another process is polled for", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		fs := &settleOnSecondGet{Store: e.store}
		c, err := idem.New(fs, e.baseOpts()...)
		require.NoError(t, err)
		res, err := c.Wait(e.ctx, "", "k")
		require.NoError(t, err)
		require.Equal(t, idem.StateFailed, res.State)
		require.Equal(t, []time.Duration{idem.WaitPoll}, e.clock.Sleeps(), "one poll on the Client's clock")
	})

	t.Run("returns at once when flagged or settled, or ctx ends", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		_, err = e.client.Wait(e.ctx, "", "nope")
		require.ErrorIs(t, err, idem.ErrNotFound)

		ctx, cancel := context.WithCancelCause(e.ctx)
		cancel(context.DeadlineExceeded)
		res, err := e.client.Wait(ctx, "", "k")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, idem.StatePending, res.State)

		require.NoError(t, e.client.Close())
		_, err = e.client.Wait(e.ctx, "", "k")
		require.ErrorIs(t, err, idem.ErrClosed)
	})
}

// settleOnSecondGet settles its one operation behind the Client's back
// (as another process would) after the first read.
type settleOnSecondGet struct {
	idem.Store
	gets int
}

func (s *settleOnSecondGet) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	s.gets++
	if s.gets == 2 {
		if _, err := s.Store.Resolve(ctx, scope, key, journal.Manual{State: idem.StateFailed, Reason: "other replica", By: "ops", At: epoch}); err != nil {
			return nil, err
		}
	}
	return s.Store.Get(ctx, scope, key)
}
