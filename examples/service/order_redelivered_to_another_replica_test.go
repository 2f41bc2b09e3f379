package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// forgettingProvider keeps each key's answer for 30 min from when it
// stored it, then forgets the key: the Idempotency middleware of the
// Fiber Go framework at its default Lifetime
// (docs.gofiber.io/api/middleware/idempotency), here reading
// Idempotency-Key, the shortest default window idem's DefaultKeyRetention
// is sized against. While down it answers 503 before any handler runs (a
// load balancer with no healthy origin; modelled).
type forgettingProvider struct {
	srv   *httptest.Server
	clock *idemtest.Clock

	mu      sync.Mutex
	down    bool
	stored  map[string]time.Time
	charges map[string]int
}

func newForgettingProvider(t *testing.T, clock *idemtest.Clock) *forgettingProvider {
	t.Helper()
	p := &forgettingProvider{clock: clock, stored: map[string]time.Time{}, charges: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if at, ok := p.stored[key]; !ok || p.clock.Now().Sub(at) >= 30*time.Minute {
			p.stored[key] = p.clock.Now()
			p.charges[key]++
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"pay_42","status":"succeeded"}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *forgettingProvider) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *forgettingProvider) chargesOf(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charges[key]
}

// replica is one replica of the service on a journal at path, at idem's
// default settings but for its clock and the provider's http.Client.
func replica(t *testing.T, path string, p *forgettingProvider) *idem.Client {
	t.Helper()
	c, err := idem.Open(path, idem.WithClock(p.clock), idem.WithHTTPClient(p.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A queue delivers order 42 to replica A, which pays it and dies before
// its ack; 15 min later (the queue's visibility timeout) it delivers the
// order to replica B, while the provider is down. B's call hands the
// order off unknown; B's Resume 16 min later, the provider back, resends
// it. The order's id finds the earlier payment only in the journal that
// holds it: on a journal of its own, B counts the key's window from its
// own first send (12:15, resends until 12:33), not A's (12:00), and
// resends a key the provider forgot at 12:30: a second charge, settled
// succeeded with nothing flagged. On the journal A used, which replicas
// share through pgjournal (modelled here by B's delivery reaching that
// journal's Client), the order is found paid and nothing is sent. README's
// "Which journal" says so.
func TestAnOrderRedeliveredToAnotherReplica(t *testing.T) {
	o := order{ID: "order-42", N: 42}
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		ownJournal bool
		calls      tally // how B answers the order's caller
		charges    int
	}{
		{"on a journal of its own is charged again once the provider forgot the key", true, tally{handedOff: 1}, 2},
		{"on the journal the first replica used is paid once", false, tally{settled: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := idemtest.NewClock(start)
			p := newForgettingProvider(t, clock)
			dir := t.TempDir()
			a := replica(t, filepath.Join(dir, "a.journal"), p)
			ordersURL := p.srv.URL + "/orders"
			if res, err := submitOrder(context.Background(), a, ordersURL, o); err != nil || res.State != idem.StateSucceeded {
				t.Fatalf("A: %+v, %v; want succeeded", res, err)
			}

			b := a
			if tc.ownJournal {
				b = replica(t, filepath.Join(dir, "b.journal"), p)
			}
			clock.Advance(15 * time.Minute)
			p.setDown(true)
			res, err := submitOrder(context.Background(), b, ordersURL, o)
			var calls tally
			if err := calls.add(res, err); err != nil {
				t.Fatalf("B: %v; want it journaled", err)
			}
			if calls != tc.calls {
				t.Errorf("B's call: %+v; want %+v", calls, tc.calls)
			}
			p.setDown(false)
			if d := start.Add(31 * time.Minute).Sub(clock.Now()); d > 0 {
				clock.Advance(d)
			}
			if _, err := b.Resume(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := p.chargesOf(o.ID); got != tc.charges {
				t.Errorf("provider charged order 42 %d times; this route charges it %d", got, tc.charges)
			}
		})
	}
}
