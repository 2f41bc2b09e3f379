package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// failingUntil is a payment API that answers every submit 500, before
// taking the order, until `back` by the shared clock; then it takes one
// order per key. Its result endpoint (GET /operations/{key}) knows only
// the orders it took.
type failingUntil struct {
	srv   *httptest.Server
	clock *idemtest.Clock
	back  time.Time

	mu     sync.Mutex
	orders map[string]int
}

func newFailingUntil(t *testing.T, clock *idemtest.Clock, back time.Time) *failingUntil {
	t.Helper()
	s := &failingUntil{clock: clock, back: back, orders: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			key := strings.TrimPrefix(r.URL.Path, "/operations/")
			if s.orders[key] == 0 {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"error":"no such operation"}`)
				return
			}
			_, _ = fmt.Fprintf(w, `{"id":"ord_%s","state":"succeeded"}`, key)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if s.clock.Now().Before(s.back) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"internal"}`)
			return
		}
		if s.orders[key] == 0 {
			s.orders[key]++
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"ord_%s"}`, key)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *failingUntil) ordersFor(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orders[key]
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
	srv := newFailingUntil(t, clock, epoch.Add(130*time.Minute))
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
	require.Zero(t, srv.ordersFor("k"), "resent while the clock could not tell the key's age")

	runUntil(t, e, epoch.Add(5*time.Hour))
	rec, err = store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, rec.State, "review %q", rec.Review)
	require.Empty(t, rec.Review)
	require.Equal(t, 1, srv.ordersFor("k"), "orders")
}
