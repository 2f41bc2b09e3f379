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

// claimWatch is the journal, telling the test when Run has claimed key.
type claimWatch struct {
	*journal.Store
	key     string
	claimed chan struct{}
}

func (w *claimWatch) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error) {
	due, err := w.Store.ClaimDue(ctx, owner, now, expires, limit)
	for _, d := range due {
		if d.Record.Key == w.key {
			select {
			case w.claimed <- struct{}{}:
			default:
			}
		}
	}
	return due, err
}

// answerHeld lets each submit reach the server, then holds the answer
// until release is closed: the order is taken, its answer on its way.
type answerHeld struct {
	base     http.RoundTripper
	answered chan struct{}
	release  chan struct{}
}

func (a *answerHeld) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if r.Method == http.MethodPost {
		a.answered <- struct{}{}
		<-a.release
	}
	return resp, err
}

// One process, one journal: a clock stepped an hour ahead while a Submit
// waits for its answer makes the Submit's lease look expired, and Run
// claims the operation. Run's visit joins the Submit in this process, as
// any caller of the same key does: the Submit is not another replica's
// to fence. Its answer, the order taken, must be journaled and returned,
// not dropped with "another replica took the operation over".
func TestRunDoesNotFenceThisProcesssOwnCall(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	clk := &skewedClock{Clock: clock}
	srv := newOrderAPI(t, clock, func(time.Time, http.ResponseWriter) bool { return false })
	held := &answerHeld{base: srv.srv.Client().Transport, answered: make(chan struct{}, 1), release: make(chan struct{})}

	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	watch := &claimWatch{Store: store, key: "k", claimed: make(chan struct{}, 1)}
	c, err := idem.New(watch, idem.WithHTTPClient(&http.Client{Transport: held}), idem.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	submitted := make(chan callResult, 1)
	go func() {
		res, err := c.Submit(context.Background(), idem.Request{Key: "k", URL: srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
		submitted <- callResult{res, err}
	}()
	within(t, held.answered, "the submit reaching the server")
	clk.offset.Store(int64(time.Hour)) // NTP steps the clock

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := runAsync(ctx, c)
	within(t, watch.claimed, "Run claiming the operation")
	close(held.release)
	got := within(t, submitted, "Submit")
	cancel()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)

	require.NoError(t, got.err)
	require.Equal(t, idem.StateSucceeded, got.res.State)
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.Len(t, rec.Attempts, 1, "attempts journaled")
	require.Equal(t, 1, srv.received(), "submits received")
	require.Equal(t, 1, orders(srv, "k"), "orders")
}
