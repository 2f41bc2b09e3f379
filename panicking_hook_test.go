package idem_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A Settle hook that panics on a Resume visit's settlement (metrics
// labelled by a field some results lack, say) ran after the settlement
// was committed: the visit's panic, caught, skipped the WithSettleFunc
// callback, the application's only word of work it handed off, and no
// visit ever came again to report it (the operation settled). The order
// was made and never shipped. The hook's panic is logged; the callback
// still runs, once.
func TestSettleFuncRunsAfterPanickingSettleHook(t *testing.T) {
	srv, start, stop := preparedOrderBoots(t)
	var mu sync.Mutex
	var reported []*idem.Result
	settleFunc := idem.WithSettleFunc(func(res *idem.Result) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, res)
	})
	panicking := idem.Hooks{Settle: func(context.Context, *idem.Result) {
		var labels map[string]any
		_ = labels["region"].(string)
	}}
	resumeOrderOnce(t, srv, start, stop, 2, settleFunc, idem.WithHooks(panicking))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1, "WithSettleFunc reports the settlement once, its hook's panic notwithstanding")
	require.Equal(t, idem.StateSucceeded, reported[0].State)
	require.Equal(t, "order-1", reported[0].Key)
	require.Contains(t, string(srv.answer("order-1")), `"id":"`+reported[0].ResourceID+`"`)
}

// A Settle hook that panics on a Resume visit's settlement skipped the
// Call hook's end (a tracing span, an in-flight gauge left open for
// ever), and the visit logged that the operation "stays open for the
// next visit" though it had just settled. The call's end now runs once,
// and the log says the visit panicked with the operation no longer open.
func TestPanickingSettleHookOnResumeVisit(t *testing.T) {
	srv, start, stop := preparedOrderBoots(t)
	var mu sync.Mutex
	ends := 0
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	hooks := idem.Hooks{
		Call: func(ctx context.Context, _ idem.CallEvent) (context.Context, func(*idem.Result, error)) {
			return ctx, func(*idem.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				ends++
			}
		},
		Settle: func(context.Context, *idem.Result) { panic("metrics label missing") },
	}
	resumeOrderOnce(t, srv, start, stop, 1, idem.WithHooks(hooks), idem.WithLogger(logger))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, ends, "the Call hook's end runs once, the Settle hook's panic notwithstanding")
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "a visit panicked") {
			line = l
		}
	}
	require.NotEmpty(t, line, "the panic is logged")
	require.NotContains(t, line, "stays open")
	require.Contains(t, line, "open=false")
}

// preparedOrderBoots is amountOrdersBoots with order-1 prepared (and the
// client that prepared it closed): the next boot's Resume sends it.
func preparedOrderBoots(t *testing.T) (*amountOrders, func(...idem.Option) (*idem.Client, *journal.Store), func(*idem.Client, *journal.Store)) {
	srv, ts, start, stop := amountOrdersBoots(t)
	c, store := start()
	_, err := c.Prepare(context.Background(), idem.Request{Key: "order-1", URL: ts.URL + "/orders", Body: []byte(`{"amount":1200}`)})
	require.NoError(t, err)
	stop(c, store)
	return srv, start, stop
}

// resumeOrderOnce boots boots clients with opts one after another, each
// Resume leaving order-1 succeeded, and checks the server made it once,
// from one POST.
func resumeOrderOnce(t *testing.T, srv *amountOrders, start func(...idem.Option) (*idem.Client, *journal.Store), stop func(*idem.Client, *journal.Store), boots int, opts ...idem.Option) {
	ctx := context.Background()
	for boot := 1; boot <= boots; boot++ {
		c, store := start(opts...)
		_, err := c.Resume(ctx)
		require.NoError(t, err, "boot %d", boot)
		op, err := c.Lookup(ctx, "", "order-1")
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, op.State, "boot %d", boot)
		stop(c, store)
	}
	made, posts := srv.counts("order-1")
	require.Equal(t, 1, made, "orders")
	require.Equal(t, 1, posts, "posts")
}

// A person's resolution (the admin handler's POST /resolve) or a
// provider's webhook event (Confirm) settles an order handed off unknown
// (ErrUnknownOutcome) while the Settle hook panics on it. The panic goes
// up to the caller (net/http recovers it in a handler: the operator or
// the provider gets no answer), but the settlement is committed, and the
// retry finds it settled (409, or a redelivery that changes nothing):
// skipped by the panic, the WithSettleFunc callback, the application's
// only word of work it handed off, was never called. It now runs, once.
func TestSettleFuncRunsAfterPanickingSettleHookOnResolveOrConfirm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		settle func(e *env) error
	}{
		{"resolve", func(e *env) error {
			_, err := e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "alice"})
			return err
		}},
		{"confirm", func(e *env) error {
			_, err := e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateSucceeded, "ord_000001", "evt_1"))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reports settleFuncReports
			e := newEnv(t, noResultEndpoint(), clientOpts(
				reports.option(),
				idem.WithHooks(idem.Hooks{Settle: func(context.Context, *idem.Result) { panic("metrics label missing") }}),
			))
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k", Count: 1000}))
			_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "every answer lost")
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders before the settlement")
			sent := len(e.srv.Requests())

			require.PanicsWithValue(t, "metrics label missing", func() { _ = tc.settle(e) }, "the hook's panic reaches the caller")
			// The retry: the operator's resolve is refused as settled
			// already (OnlyOpen, as the admin handler asks), the event's
			// redelivery changes nothing.
			if tc.name == "resolve" {
				_, err = e.client.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "again", By: "alice", OnlyOpen: true})
				require.ErrorIs(t, err, journal.ErrTerminal)
			} else {
				require.NoError(t, tc.settle(e))
			}

			op, err := e.client.Lookup(e.ctx, "", "k")
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, op.State)
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders after the settlement")
			require.Len(t, e.srv.Requests(), sent, "requests sent after the settlement")
			reported := reports.results()
			require.Len(t, reported, 1, "WithSettleFunc reports the settlement once, its hook's panic notwithstanding")
			require.Equal(t, "ord_000001", reported[0].ResourceID)
		})
	}
}

// settleFuncReports records what WithSettleFunc is told.
type settleFuncReports struct {
	mu  sync.Mutex
	got []*idem.Result
}

func (s *settleFuncReports) option() idem.Option {
	return idem.WithSettleFunc(func(res *idem.Result) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, res)
	})
}

func (s *settleFuncReports) results() []*idem.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*idem.Result(nil), s.got...)
}

// keyMovedThenLearnt's payment "k" (every send charged by an endpoint
// that ignores the key, modelled on Solidgate's, answers lost) is
// settled succeeded, ReviewMaybeTwice, by the provider's webhook
// (Confirm) or by a Resume visit querying the order's status, while the
// Settle hook panics (metrics labelled by a field some results lack).
// The Review hook, called after it, was skipped: the settlement
// committed, no later call flags it again, and the person who must
// check for a second charge was never told. It now runs once, and the
// Settle hook's panic still goes on up (to Confirm's caller; a visit's
// is caught and logged).
func TestReviewHookFiresAfterPanickingSettleHook(t *testing.T) {
	panicking := idem.Hooks{Settle: func(context.Context, *idem.Result) { panic("metrics label missing") }}
	t.Run("confirm", func(t *testing.T) {
		reviews := settleKeyMovedThenLearnt(t, true, panicking, func(t *testing.T, c *idem.Client) {
			require.PanicsWithValue(t, "metrics label missing", func() {
				_, _ = c.Confirm(t.Context(), "", "k", payment2Settled)
			}, "the Settle hook's panic reaches Confirm's caller")
		})
		require.Equal(t, []string{idem.ReviewMaybeTwice}, reviews, "Review hook calls")
	})
	t.Run("resume visit", func(t *testing.T) {
		reviews := settleKeyMovedThenLearnt(t, true, panicking, func(t *testing.T, c *idem.Client) {
			_, err := c.Resume(t.Context())
			require.NoError(t, err, "Resume(): the visit's panic caught")
		})
		require.Equal(t, []string{idem.ReviewMaybeTwice}, reviews, "Review hook calls")
	})
}

// A webhook event saying an order failed contradicts its recorded
// success (the order was made: the provider's event is another
// attempt's, or wrong): Confirm keeps the success and flags the
// operation ReviewConfirmConflict, then calls the ConfirmConflict hook
// and the Review hook. A ConfirmConflict hook that panicked (an alert
// route missing) skipped the Review hook: the redelivery finds the
// confirmation recorded and tells nobody, and the person was never
// paged. It now runs once, the panic going on up to Confirm's caller.
func TestReviewHookFiresAfterPanickingConfirmConflictHook(t *testing.T) {
	var (
		mu      sync.Mutex
		reviews []string
	)
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithHooks(idem.Hooks{
		ConfirmConflict: func(context.Context, *idem.Result, idem.Confirmation) { panic("alert route missing") },
		Review: func(_ context.Context, r *idem.Result) {
			mu.Lock()
			reviews = append(reviews, r.Review)
			mu.Unlock()
		},
	})))
	_, err := e.client.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.NoError(t, err)
	require.PanicsWithValue(t, "alert route missing", func() {
		_, _ = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateFailed, "", "evt_1"))
	}, "the ConfirmConflict hook's panic reaches Confirm's caller")
	_, err = e.client.Confirm(e.ctx, "", "k", webhookEvent(idem.StateFailed, "", "evt_1"))
	require.ErrorIs(t, err, journal.ErrConfirmConflict, "the redelivery, which calls no hook")

	op, err := e.client.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, idem.ReviewConfirmConflict, op.Review)
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{idem.ReviewConfirmConflict}, reviews, "Review hook calls")
}
