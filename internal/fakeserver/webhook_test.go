package fakeserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

var secret = []byte("whsec_test")

// receiver is a loopback webhook endpoint that records what it gets.
type receiver struct {
	ts     *httptest.Server
	mu     sync.Mutex
	events []fakeserver.Event
	sigs   []string
	bodies [][]byte
	status int // what it answers; 200 when 0
}

func newReceiver(t testing.TB) *receiver {
	t.Helper()
	r := &receiver{}
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		var ev fakeserver.Event
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.sigs = append(r.sigs, req.Header.Get(fakeserver.SignatureHeader))
		r.bodies = append(r.bodies, body)
		status := r.status
		r.mu.Unlock()
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.ts.Close)
	return r
}

func (r *receiver) got() []fakeserver.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fakeserver.Event(nil), r.events...)
}

// withHooks is a harness whose server sends events to r.
func withHooks(t testing.TB, r *receiver, w fakeserver.Webhook) *harness {
	t.Helper()
	w.URL, w.Secret = r.ts.URL+"/hooks", secret
	h := newHarness(t, fakeserver.Config{Webhook: &w, Seed: 7})
	t.Cleanup(h.srv.Close)
	return h
}

func flush(t testing.TB, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.srv.FlushWebhooks(ctx))
}

// TestWebhookEvents: an event per state each committed operation reaches,
// signed, echoing the request's metadata.
func TestWebhookEvents(t *testing.T) {
	r := newReceiver(t)
	h := withHooks(t, r, fakeserver.Webhook{})
	h.submit(t, "k1", `{"amount":1,"metadata":{"idem_key":"k1"}}`)
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.Decline, Key: "k2"}))
	h.submit(t, "k2", `{"amount":2}`)
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.SlowProcessing, Key: "k3", Delay: time.Hour}))
	h.submit(t, "k3", `{"metadata":{"idem_key":"k3"}}`)
	h.submit(t, "k1", `{"amount":1,"metadata":{"idem_key":"k1"}}`) // a replay: no new event
	flush(t, h)
	start := h.clock.Now()
	h.clock.Advance(time.Hour) // k3's processing ends: its succeeded event
	flush(t, h)

	byID := map[string]fakeserver.Event{}
	for _, ev := range r.got() {
		byID[ev.ID] = ev
	}
	want := map[string]struct{ typ, state, id, meta string }{
		"evt_000001": {"order.succeeded", "succeeded", "ord_000001", `{"idem_key":"k1"}`},
		"evt_000002": {"order.failed", "failed", "", ""},
		"evt_000003": {"order.processing", "processing", "ord_000002", `{"idem_key":"k3"}`},
		"evt_000004": {"order.succeeded", "succeeded", "ord_000002", `{"idem_key":"k3"}`},
	}
	require.Len(t, byID, len(want), "events received")
	for id, w := range want {
		ev := byID[id]
		require.Equal(t, w.typ, ev.Type, "%s type", id)
		require.Equal(t, w.state, ev.State, "%s state", id)
		require.Equal(t, w.id, ev.ResourceID, "%s resource id", id)
		require.Equal(t, w.meta, string(ev.Metadata), "%s metadata", id)
		created := start
		if id == "evt_000004" {
			created = start.Add(time.Hour)
		}
		require.Equal(t, created.Unix(), ev.Created, "%s created", id)
	}
	require.Equal(t, "card declined", byID["evt_000002"].Reason)
	r.mu.Lock()
	for i, body := range r.bodies {
		// Each delivery is signed when it is sent: here, at its event's
		// creation.
		require.Equal(t, fakeserver.Sign(secret, body, time.Unix(r.events[i].Created, 0)), r.sigs[i], "signature of delivery %d", i)
	}
	r.mu.Unlock()
	require.Equal(t, fakeserver.WebhookStats{Events: 4, Delivered: 4}, h.srv.WebhookStats())

	h.srv.Reset()
	require.Equal(t, fakeserver.WebhookStats{}, h.srv.WebhookStats(), "after Reset")
}

// TestWebhookFaults: lost, duplicated and delayed events, out of order,
// all accounted for.
func TestWebhookFaults(t *testing.T) {
	const orders = 60
	r := newReceiver(t)
	h := withHooks(t, r, fakeserver.Webhook{Lose: 0.2, Duplicate: 0.3, Delay: 20 * time.Millisecond})
	for i := range orders {
		h.submit(t, fmt.Sprintf("k%02d", i), `{}`)
	}
	flush(t, h)
	st := h.srv.WebhookStats()
	got := r.got()
	distinct := map[string]int{}
	for _, ev := range got {
		distinct[ev.ID]++
	}
	require.Equal(t, orders, st.Events, "events")
	require.Equal(t, st.Events, len(distinct)+st.Lost, "every event delivered or lost")
	require.Equal(t, len(got), len(distinct)+st.Duplicated, "deliveries: one per event, two per duplicated one")
	require.Equal(t, len(got), st.Delivered)
	require.Positive(t, st.Lost, "lost events")
	require.Positive(t, st.Duplicated, "duplicated events")
	outOfOrder := 0
	for i := 1; i < len(got); i++ {
		if got[i].ID < got[i-1].ID {
			outOfOrder++
		}
	}
	require.Positive(t, outOfOrder, "events delivered out of order")
}

// TestWebhookRetriesBounded: a receiver that always fails gets each event
// 1+Retries times, then the server gives up.
func TestWebhookRetriesBounded(t *testing.T) {
	r := newReceiver(t)
	r.status = http.StatusInternalServerError
	h := withHooks(t, r, fakeserver.Webhook{Retries: 2, RetryWait: time.Millisecond})
	h.submit(t, "k", `{}`)
	flush(t, h)
	require.Len(t, r.got(), 3, "deliveries of one event")
	require.Equal(t, fakeserver.WebhookStats{Events: 1, Failed: 1, Retries: 2}, h.srv.WebhookStats())
}

// TestWebhookCloseDuringRetryWait: a retry that Close stops while it
// waits was never sent, and is not counted as one.
func TestWebhookCloseDuringRetryWait(t *testing.T) {
	r := newReceiver(t)
	r.status = http.StatusInternalServerError
	h := withHooks(t, r, fakeserver.Webhook{Retries: 2, RetryWait: time.Minute})
	h.submit(t, "k", `{}`)
	deadline := time.Now().Add(10 * time.Second)
	for len(r.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
	require.Len(t, r.got(), 1, "first delivery, before Close")
	h.srv.Close()
	require.Len(t, r.got(), 1, "deliveries after Close")
	require.Equal(t, fakeserver.WebhookStats{Events: 1, Failed: 1}, h.srv.WebhookStats())
}

// TestWebhookCloseStops: Close ends deliveries waiting out a delay, and
// leaves no goroutine behind.
func TestWebhookCloseStops(t *testing.T) {
	r := newReceiver(t)
	before := runtime.NumGoroutine()
	w := fakeserver.Webhook{URL: r.ts.URL, Secret: secret, Delay: time.Minute}
	srv, err := fakeserver.New(fakeserver.Config{Webhook: &w, Seed: 1})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	for i := range 5 {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/orders", nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k"+string(rune('a'+i)))
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	ts.Close()
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close() did not return within a minute with deliveries waiting")
	}
	require.Empty(t, r.got(), "nothing delivered: every delivery was still waiting")
	require.Equal(t, fakeserver.WebhookStats{Events: 5, Failed: 5}, srv.WebhookStats(), "deliveries stopped by Close count as failed")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.Error(t, srv.FlushWebhooks(ctx), "FlushWebhooks() after Close with deliveries undone")

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines after Close")
}

func TestWebhookConfigInvalid(t *testing.T) {
	ok := fakeserver.Webhook{URL: "http://127.0.0.1:9/hooks", Secret: secret}
	tests := []struct {
		name   string
		mutate func(*fakeserver.Webhook)
	}{
		{"not loopback", func(w *fakeserver.Webhook) { w.URL = "http://example.com/hooks" }},
		{"private address", func(w *fakeserver.Webhook) { w.URL = "http://10.0.0.1/hooks" }},
		{"not http", func(w *fakeserver.Webhook) { w.URL = "ftp://127.0.0.1/" }},
		{"no secret", func(w *fakeserver.Webhook) { w.Secret = nil }},
		{"lose over 1", func(w *fakeserver.Webhook) { w.Lose = 1.5 }},
		{"negative duplicate", func(w *fakeserver.Webhook) { w.Duplicate = -0.1 }},
		{"delay over a minute", func(w *fakeserver.Webhook) { w.Delay = 2 * time.Minute }},
		{"too many retries", func(w *fakeserver.Webhook) { w.Retries = 11 }},
		{"negative timeout", func(w *fakeserver.Webhook) { w.Timeout = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ok
			tt.mutate(&w)
			srv, err := fakeserver.New(fakeserver.Config{Webhook: &w})
			require.Error(t, err)
			require.Nil(t, srv)
		})
	}
	for _, u := range []string{"http://localhost:9/", "http://[::1]:9/"} {
		w := ok
		w.URL = u
		srv, err := fakeserver.New(fakeserver.Config{Webhook: &w})
		require.NoError(t, err, "URL %s", u)
		srv.Close()
	}
}

// TestSlowProcessingSucceededEventIsSentOnceItIsDone: while the operation
// reports processing, its one event says processing; the succeeded event
// comes once processing ends by the server's clock, dated then, not at
// the arrival, when the result endpoint still said processing.
func TestSlowProcessingSucceededEventIsSentOnceItIsDone(t *testing.T) {
	r := newReceiver(t)
	h := withHooks(t, r, fakeserver.Webhook{})
	start := h.clock.Now()
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.SlowProcessing, Key: "k", Delay: time.Hour}))
	require.Equal(t, http.StatusAccepted, h.submit(t, "k", `{"metadata":{"idem_key":"k"}}`).status)
	flush(t, h)
	require.Equal(t, fakeserver.WebhookStats{Events: 1, Delivered: 1}, h.srv.WebhookStats(), "processing only")
	require.Equal(t, "order.processing", r.got()[0].Type)

	h.clock.Advance(time.Hour - time.Second)
	flush(t, h)
	require.Equal(t, fakeserver.WebhookStats{Events: 1, Delivered: 1}, h.srv.WebhookStats(), "still processing")

	h.clock.Advance(time.Second)
	flush(t, h)
	require.Equal(t, fakeserver.WebhookStats{Events: 2, Delivered: 2}, h.srv.WebhookStats())
	got := r.got()
	require.Len(t, got, 2)
	require.Equal(t, "order.succeeded", got[1].Type)
	require.Equal(t, `{"idem_key":"k"}`, string(got[1].Metadata))
	require.Equal(t, start.Add(time.Hour).Unix(), got[1].Created, "dated when processing ended")
	require.Equal(t, 1, h.srv.Effects("", "k"))
}
