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

// A server's "429 Too Many Requests, Retry-After" asks the client not to
// send again before the wait ends (RFC 6585 section 4, RFC 9110 section
// 10.2.3; GitHub warns that requests made while rate limited can get an
// integration banned). The wait outlives the call that read it, as a
// hand-off's does (TestHandOffHonoursLongRetryAfter). These tests meet an
// order API that refuses every submit before its wait ends: a second
// refusal is a resend too early. Default settings but the clock.

// throttledOrder is a journal, and an order API on clock that answers
// every submit 429 with a Retry-After until until.
type throttledOrder struct {
	clock *idemtest.Clock
	until time.Time
	srv   *orderAPI
	store *journal.Store
}

func newThrottledOrder(t *testing.T, rest time.Duration) *throttledOrder {
	t.Helper()
	o := &throttledOrder{clock: idemtest.NewClock(epoch), until: epoch.Add(rest)}
	o.srv = newOrderAPI(t, o.clock, throttling(http.StatusTooManyRequests, o.until))
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	o.store = store
	return o
}

// client is a Client of the journal with default settings but the clock,
// and opts.
func (o *throttledOrder) client(t *testing.T, opts ...idem.Option) *idem.Client {
	t.Helper()
	c, err := idem.New(o.store, append([]idem.Option{idem.WithHTTPClient(o.srv.srv.Client()), idem.WithClock(o.clock)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// submit submits "k" with c, which must leave it pending after one refusal.
func (o *throttledOrder) submit(t *testing.T, ctx context.Context, c *idem.Client) {
	t.Helper()
	res, err := c.Submit(ctx, idem.Request{Key: "k", URL: o.srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StatePending, res.State, "a 429 did not execute")
	require.Equal(t, 1, o.srv.received(), "submits")
}

// requireWaiting checks that "k" is still open, sent once, and not due
// before the server's wait ends.
func (o *throttledOrder) requireWaiting(t *testing.T) {
	t.Helper()
	rec, err := o.store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.True(t, rec.Open(), "state %s", rec.State)
	require.Equal(t, 1, o.srv.received(), "submits")
	require.False(t, rec.NextDue.Before(o.until), "NextDue %v: before the server's Retry-After ends (%v)", rec.NextDue, o.until)
}

// requireSettledOnce checks that "k" succeeded with one order, refused
// only the first time.
func (o *throttledOrder) requireSettledOnce(t *testing.T) {
	t.Helper()
	rec, err := o.store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	refused, orders := o.srv.counts()
	require.Equal(t, 1, refused, "submits refused: sent before the server's Retry-After ended (%d received)", o.srv.received())
	require.Equal(t, 1, orders["k"], "orders")
}

// A caller whose context ends as the server answers "429, Retry-After: 31"
// (an HTTP handler's deadline, a client gone) leaves its operation to the
// reconciler. It was left due at once, and Run's next pass, five seconds
// on, sent it again into the same limit.
func TestStoppedCallerKeepsTheServersRetryAfter(t *testing.T) {
	o := newThrottledOrder(t, 30*time.Second)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	c := o.client(t, idem.WithHooks(idem.Hooks{Attempt: func(context.Context, idem.AttemptEvent) { stop() }}))
	o.submit(t, ctx, c)
	o.requireWaiting(t)

	runUntil(t, &env{t: t, clock: o.clock, client: c, ctx: t.Context()}, o.until.Add(2*time.Minute))
	o.requireSettledOnce(t)
}

// A service restarted while the server's wait for its operations still
// runs: Resume, which visits every open operation whatever its NextDue,
// sent each again at once; so did a caller's Do (a retried request of
// the service's own client, with the same key). Each must wait out a
// short wait, as the call that read it would have, and leave a long one
// to Run, due when it ends, sending nothing.
func TestJournaledRetryAfterHonoured(t *testing.T) {
	drives := []struct {
		who   string
		drive func(*idem.Client) (settled bool, err error)
	}{
		{"Resume", func(c *idem.Client) (bool, error) {
			sum, err := c.Resume(context.Background())
			require.Equal(t, 1, sum.Visited, "summary %+v", sum)
			return sum.Succeeded == 1, err
		}},
		{"Do", func(c *idem.Client) (bool, error) {
			res, err := c.Do(context.Background(), &idem.Operation{Key: "k"})
			require.NotNil(t, res)
			if err != nil {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome)
				require.Equal(t, idem.StatePending, res.State)
				return false, nil
			}
			return res.State == idem.StateSucceeded, nil
		}},
	}
	tests := []struct {
		name    string
		rest    time.Duration // the server's limit, from the first submit on
		restart time.Duration // when the service starts again
		settled bool          // by the drive, once the wait is over
	}{
		{"seconds", 20 * time.Second, 5 * time.Second, true},
		{"an hour", time.Hour, 5 * time.Minute, false},
	}
	for _, d := range drives {
		for _, tt := range tests {
			t.Run(d.who+"/"+tt.name, func(t *testing.T) {
				o := newThrottledOrder(t, tt.rest)
				// The process that met the limit: one attempt, then it stops.
				before := o.client(t, idem.WithMaxAttempts(1))
				o.submit(t, t.Context(), before)
				require.NoError(t, before.Close())

				o.clock.Advance(tt.restart)
				c := o.client(t)
				settled, err := d.drive(c)
				require.NoError(t, err)
				require.Equal(t, tt.settled, settled, "settled by %s", d.who)
				if tt.settled {
					o.requireSettledOnce(t)
					return
				}
				o.requireWaiting(t)

				runUntil(t, &env{t: t, clock: o.clock, client: c, ctx: t.Context()}, o.until.Add(2*time.Minute))
				o.requireSettledOnce(t)
			})
		}
	}
}
