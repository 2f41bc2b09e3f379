package idem_test

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// failingUntil answers every submit 500, before taking the order, until
// back.
func failingUntil(back time.Time) func(time.Time, http.ResponseWriter) bool {
	return func(now time.Time, w http.ResponseWriter) bool {
		if !now.Before(back) {
			return false
		}
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"internal"}`)
		return true
	}
}

// A clock two days fast for twenty minutes (a bad time source, put right
// by NTP) must not make Run flag an operation two hours old "key
// expired" for good: Run has measured, by its own waits, that it is not
// two days old. Nor may Run resend it while the clock cannot tell. Once
// the clock is right again, inside the 24 h window, Run resends it with
// its key and it settles, ordered once.
func TestRunKeyWindowOutlivesClockSteppedAhead(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	clk := &steppedClock{Clock: clock}
	srv := newOrderAPI(t, clock, failingUntil(epoch.Add(130*time.Minute)))
	clk.from, clk.to, clk.ahead = epoch.Add(2*time.Hour), epoch.Add(140*time.Minute), 2*24*time.Hour

	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, idem.WithHTTPClient(srv.srv.Client()), idem.WithClock(clk),
		idem.WithResultEndpoint(srv.srv.URL+"/operations/{key}"), idem.WithKeyRetention(idem.KeyRetentionStripe))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateUnknown, res.State, "answered 500: may have been taken")

	e := &env{t: t, clock: clock, client: c, ctx: t.Context()}
	runUntil(t, e, epoch.Add(139*time.Minute))
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Empty(t, rec.Review, "flagged while the clock ran two days fast")
	require.Zero(t, orders(srv, "k"), "resent while the clock could not tell the key's age")

	runUntil(t, e, epoch.Add(5*time.Hour))
	rec, err = store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State, "review %q", rec.Review)
	require.Empty(t, rec.Review)
	require.Equal(t, 1, orders(srv, "k"), "orders")
}

// orders returns the orders srv took for key.
func orders(srv *orderAPI, key string) int {
	_, taken := srv.counts()
	return taken[key]
}
