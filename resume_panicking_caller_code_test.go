package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// panickingCallerCodeChild, set in a child's environment, makes
// TestResumeOutlivesPanickingCallerCode run its workload there: before the
// fix the panic killed the process that ran it, the test binary included.
const panickingCallerCodeChild = "IDEM_TEST_PANICKING_CALLER_CODE_CHILD"

// A caller's decoder that panics on one answer (a type assertion on a
// field the API sends in another type for some orders: an amount as the
// string "12.00") killed the process when Resume or Run ran it: their
// visits run on idem's goroutines, where no caller can recover. The
// operation's attempt was journaled and the order made, its outcome not:
// every start-up's Resume asked again, got the same answer and died again,
// a crash loop that no restart ended. So did a Call hook that panics on
// one operation, before its drive. Now the visit's panic is logged and the
// operation left open (unknown once it may have been sent, never failed,
// never resent); Resume returns, its other operations settled, and the
// code fixed settles it with the one order made.
func TestResumeOutlivesPanickingCallerCode(t *testing.T) {
	if os.Getenv(panickingCallerCodeChild) != "" {
		resumeWithPanickingCallerCode(t)
		return
	}
	out := childOutput(t, "TestResumeOutlivesPanickingCallerCode", panickingCallerCodeChild)
	for _, sub := range []string{"decoder", "run", "call-hook"} {
		require.Contains(t, out, "--- PASS: TestResumeOutlivesPanickingCallerCode/"+sub, "child:\n%s", out)
	}
}

// amountOrders models an order API that de-duplicates by Idempotency-Key
// and answers a key's order at GET /orders/{key}, echoing the request's
// amount as it came: a number or a string.
type amountOrders struct {
	mu     sync.Mutex
	orders map[string][]byte // the answer per key
	made   map[string]int
	posts  map[string]int
}

func (s *amountOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		body, ok := s.orders[strings.TrimPrefix(r.URL.Path, "/orders/")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"not_found"}`))
			return
		}
		_, _ = w.Write(body)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.posts[key]++
	if body, ok := s.orders[key]; ok {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
		return
	}
	var req struct {
		Amount json.RawMessage `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.made[key]++
	body := fmt.Appendf(nil, `{"id":"ord_%d","status":"succeeded","amount":%s}`, len(s.orders)+1, req.Amount)
	s.orders[key] = body
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

func (s *amountOrders) counts(key string) (made, posts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made[key], s.posts[key]
}

func (s *amountOrders) answer(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orders[key]
}

func resumeWithPanickingCallerCode(t *testing.T) {
	// The caller's decoder reads the amount as a number, as most of its
	// orders carry it. Its order made, the operation's outcome is
	// unknown.
	strict := func(a *idem.Answer) (idem.Outcome, error) {
		var m map[string]any
		if err := json.Unmarshal(a.Body, &m); err == nil {
			_ = m["amount"].(float64)
		}
		return idem.DecodeJSON(a)
	}
	t.Run("decoder", func(t *testing.T) {
		resumeWithPanic(t, idem.StateUnknown, 1, idem.WithDecoder(strict))
	})
	t.Run("run", func(t *testing.T) { runWithPanickingDecoder(t, idem.WithDecoder(strict)) })
	// A Call hook (metrics by the request's amount, read as strict reads
	// it) that panics before the drive: nothing sent, still pending.
	call := func(ctx context.Context, ev idem.CallEvent) (context.Context, func(*idem.Result, error)) {
		if ev.Key == panickedKey {
			var m map[string]any
			_ = m["amount"].(float64)
		}
		return ctx, nil
	}
	t.Run("call-hook", func(t *testing.T) {
		resumeWithPanic(t, idem.StatePending, 0, idem.WithHooks(idem.Hooks{Call: call}))
	})
}

// panickedKey is the operation whose visit panics in resumeWithPanic.
const panickedKey = "order-string"

// resumeWithPanic prepares two orders, then starts twice with bad, whose
// code panics on panickedKey's visit: each Resume returns, the other
// order settled at the first, panickedKey's left open in state, sent
// posts times in all. A start without bad then settles it, with one
// order.
func resumeWithPanic(t *testing.T, state idem.State, posts int, bad ...idem.Option) {
	srv, ts, start, stop := amountOrdersBoots(t)
	requireSent := func(key string, made, posts int, what string) {
		t.Helper()
		m, p := srv.counts(key)
		require.Equal(t, made, m, "%s: %s orders made", what, key)
		require.Equal(t, posts, p, "%s: %s posts", what, key)
	}
	ctx := context.Background()

	c, store := start()
	for _, kb := range [...][2]string{{"order-number", `{"amount":1200}`}, {panickedKey, `{"amount":"12.00"}`}} {
		_, err := c.Prepare(ctx, idem.Request{Key: kb[0], URL: ts.URL + "/orders", Body: []byte(kb[1])})
		require.NoError(t, err)
	}
	stop(c, store)

	for boot := 1; boot <= 2; boot++ {
		what := fmt.Sprintf("boot %d", boot)
		c, store = start(bad...)
		sum, err := c.Resume(ctx)
		require.NoError(t, err, what)
		require.Equal(t, 3-boot, sum.Visited, "%s: the other order settled at the first", what)
		op, err := c.Lookup(ctx, "", panickedKey)
		require.NoError(t, err)
		require.Equal(t, state, op.State, "%s: open, never failed", what)
		stop(c, store)
		requireSent(panickedKey, posts, posts, what+": asked about, never resent")
	}
	requireSent("order-number", 1, 1, "after two boots")

	c, store = start()
	sum, err := c.Resume(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Visited)
	require.Equal(t, 1, sum.Succeeded)
	op, err := c.Lookup(ctx, "", panickedKey)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.NotNil(t, op.Result)
	require.Contains(t, string(srv.answer(panickedKey)), `"id":"`+op.Result.ResourceID+`"`)
	stop(c, store)
	requireSent(panickedKey, 1, 1, "fixed")
}

// amountOrdersBoots serves a new amountOrders, and starts (start) and
// stops (stop) a Client of its, on one journal opened anew at each start
// as a restarted process opens it. start's options come after the
// server's client and result endpoint.
func amountOrdersBoots(t *testing.T) (*amountOrders, *httptest.Server, func(...idem.Option) (*idem.Client, *journal.Store), func(*idem.Client, *journal.Store)) {
	srv := &amountOrders{orders: map[string][]byte{}, made: map[string]int{}, posts: map[string]int{}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	path := filepath.Join(t.TempDir(), "idem.journal")
	start := func(opts ...idem.Option) (*idem.Client, *journal.Store) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		opts = append([]idem.Option{idem.WithHTTPClient(ts.Client()), idem.WithResultEndpoint(ts.URL + "/orders/{key}")}, opts...)
		c, err := idem.New(store, opts...)
		require.NoError(t, err)
		return c, store
	}
	stop := func(c *idem.Client, store *journal.Store) {
		require.NoError(t, c.Close())
		require.NoError(t, store.Close())
	}
	return srv, ts, start, stop
}

// runWithPanickingDecoder: Run's visit, on its own goroutine too, meets
// the answer bad panics on; Run goes on, the operation handed off
// unknown with its one order, until Run is stopped.
func runWithPanickingDecoder(t *testing.T, bad ...idem.Option) {
	srv := &amountOrders{orders: map[string][]byte{}, made: map[string]int{}, posts: map[string]int{}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer store.Close()
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(ts.Client()), idem.WithResultEndpoint(ts.URL + "/orders/{key}")}, bad...)...)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// PrepareIn's operation is due at once: nobody calls Do for it.
	_, err = c.PrepareIn(ctx, idem.Request{Key: panickedKey, URL: ts.URL + "/orders", Body: []byte(`{"amount":"12.00"}`)}, store.Create)
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := store.Get(ctx, idem.DefaultScope, panickedKey)
		require.NoError(t, err)
		if rec.State == journal.StateUnknown {
			break
		}
		require.True(t, time.Now().Before(deadline), "Run's visit left %s %s", panickedKey, rec.State)
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-ran:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("Run still running 30 s after its context ended")
	}
	made, posts := srv.counts(panickedKey)
	require.Equal(t, 1, made)
	require.Equal(t, 1, posts)
}
