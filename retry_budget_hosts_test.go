package idem_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// An outage at one provider must not take retries away from calls to
// another: the retry budget protects a struggling server, so it is that
// server's. Before, one client-wide bucket drained by a down payment
// provider refused the order API's retries (ErrRetryBudgetEmpty), and
// orders a second attempt would have placed were left unknown.
func TestRetryBudgetIsPerHost(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	down := newServer(t, idemtest.WithClock(clock.Now))
	up := newServer(t, idemtest.WithClock(clock.Now))
	require.NoError(t, down.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Count: 10000, RetryAfter: time.Second}))

	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, idem.WithHTTPClient(up.Client()), idem.WithClock(clock)) // default budget
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	req := func(srv *idemtest.Server, key string) idem.Request {
		return idem.Request{Key: key, URL: srv.URL + "/orders", ResultURL: srv.ResultURL(key), Body: []byte(`{"amount":1}`)}
	}

	// Drain the down host's budget: its calls end without a settled order.
	for i := 0; i < 200; i++ {
		_, err := c.Submit(ctx, req(down, fmt.Sprintf("down-%d", i)))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		if errors.Is(err, idem.ErrRetryBudgetEmpty) {
			break
		}
	}
	_, err = c.Submit(ctx, req(down, "down-last"))
	require.ErrorIs(t, err, idem.ErrRetryBudgetEmpty, "the down host's retries stop")

	// The other host's first answer is a 503 too; its retry must go.
	for i := range 5 {
		key := fmt.Sprintf("up-%d", i)
		require.NoError(t, up.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Count: 1, RetryAfter: time.Second}))
		res, err := c.Submit(ctx, req(up, key))
		require.NoError(t, err, "a retry to a healthy host is not refused by another host's outage")
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, 1, up.Effects("", key), "exactly one order")
	}
}

// Stats names the drained host, and only it; a host's budget refills by
// its own successes and then leaves the list.
func TestRetryBudgetByHostInStats(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithRetryBudget(4, 1)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Count: 2, RetryAfter: time.Second}))
	_, err := e.client.Submit(e.ctx, e.req("a", `{}`))
	require.ErrorIs(t, err, idem.ErrRetryBudgetEmpty, "tokens 4 → 3 → 2: one retry, then none")
	st, err := e.client.Stats(e.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]float64{strings.TrimPrefix(e.srv.URL, "http://"): 2}, st.RetryTokensByHost)
	require.Equal(t, 2.0, st.RetryTokens)

	_, err = e.client.Submit(e.ctx, e.req("b", `{}`))
	require.NoError(t, err)
	_, err = e.client.Submit(e.ctx, e.req("c", `{}`))
	require.NoError(t, err)
	st, err = e.client.Stats(e.ctx)
	require.NoError(t, err)
	require.Empty(t, st.RetryTokensByHost, "two successes earn the two tokens back: full again")
	require.Equal(t, 4.0, st.RetryTokens)
}
