package idem_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
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
