package idem_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// A Settle hook that panics on a Resume visit's settlement (metrics
// labelled by a field some results lack, say) ran after the settlement
// was committed: the visit's panic, caught, skipped the WithSettleFunc
// callback, the application's only word of work it handed off, and no
// visit ever came again to report it (the operation settled). The order
// was made and never shipped. The hook's panic is logged; the callback
// still runs, once.
func TestSettleFuncRunsAfterPanickingSettleHook(t *testing.T) {
	srv, ts, start, stop := amountOrdersBoots(t)
	var mu sync.Mutex
	var reported []*idem.Result
	settleFunc := idem.WithSettleFunc(func(res *idem.Result) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, res)
	})
	ctx := context.Background()

	c, store := start(settleFunc)
	_, err := c.Prepare(ctx, idem.Request{Key: "order-1", URL: ts.URL + "/orders", Body: []byte(`{"amount":1200}`)})
	require.NoError(t, err)
	stop(c, store)

	panicking := idem.Hooks{Settle: func(context.Context, *idem.Result) {
		var labels map[string]any
		_ = labels["region"].(string)
	}}
	for boot := 1; boot <= 2; boot++ {
		c, store = start(settleFunc, idem.WithHooks(panicking))
		_, err = c.Resume(ctx)
		require.NoError(t, err, "boot %d", boot)
		op, err := c.Lookup(ctx, "", "order-1")
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, op.State, "boot %d", boot)
		stop(c, store)
	}
	made, posts := srv.counts("order-1")
	require.Equal(t, 1, made, "orders")
	require.Equal(t, 1, posts, "posts")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1, "WithSettleFunc reports the settlement once, its hook's panic notwithstanding")
	require.Equal(t, idem.StateSucceeded, reported[0].State)
	require.Equal(t, "order-1", reported[0].Key)
	require.Contains(t, string(srv.answer("order-1")), `"id":"`+reported[0].ResourceID+`"`)
}
