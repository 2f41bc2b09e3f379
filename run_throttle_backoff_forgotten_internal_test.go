package idem

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/journal"
)

// TestRunForgetsThrottleBackoffOfHostsDoneWith: a service calling one
// host per merchant runs Run for months. Modelled on Amazon API Gateway,
// whose throttling answers 429 "Too Many Requests" with no Retry-After
// and whose docs ask for exponential backoff
// (docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-request-throttling.html),
// each merchant's host behind a domain of its own: Run's visit of each
// handed-off order is throttled, and the caller's own Do settles it a
// moment later. Run never visits those hosts again, and kept each one's
// backoff for as long as it ran (50 entries for 50 merchants done with,
// an hour later); a pass now drops a backoff once its rest ended longer
// ago than any rest lasts (WithReconcile's maximum), when a 429 would
// start a new one anyway, and keeps the one a host throttled just now
// doubles from.
func TestRunForgetsThrottleBackoffOfHostsDoneWith(t *testing.T) {
	const merchants = 50
	gw := &throttlingGateway{posts: map[string]int{}, orders: map[string]string{}}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	c, clk := newMerchantsClient(t, srv)
	ctx := t.Context()
	host := func(i int) string { return fmt.Sprintf("shop-%03d.example", i) }
	prepare := func(i int) *Operation {
		op, err := c.Prepare(ctx, Request{Key: fmt.Sprintf("order-%03d", i), URL: "http://" + host(i) + "/orders", Body: []byte(`{"amount":100}`)})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	ops := make([]*Operation, merchants)
	for i := range ops {
		ops[i] = prepare(i)
	}
	clk.pass(c.cfg.reconcileInterval) // nobody called Do: Run sends them
	stalls := c.runStalls()
	if _, phase, err := c.pass(ctx, &runSchedule{}, stalls); err != nil {
		t.Fatalf("pass() = %v in %s", err, phase)
	}
	if len(stalls.backoff) != merchants {
		t.Fatalf("after a pass throttled by each of %d hosts, %d backoffs; want one each", merchants, len(stalls.backoff))
	}
	for i, op := range ops {
		res, err := c.Do(ctx, op)
		if err != nil || res.State != StateSucceeded {
			t.Fatalf("Do(%s) = %v, %v; want succeeded", op.Key, res, err)
		}
		if p, o := gw.counts(host(i)); p != 2 || o != 1 {
			t.Fatalf("%s: %d POSTs, %d orders; want 2 (throttled, then placed), 1", host(i), p, o)
		}
	}
	later := c.cfg.reconcileMax + c.cfg.reconcileInterval + time.Minute
	clk.pass(later)
	const lately = merchants // a host throttled by this very pass
	prepare(lately)
	clk.pass(c.cfg.reconcileInterval)
	if _, phase, err := c.pass(ctx, &runSchedule{}, stalls); err != nil {
		t.Fatalf("pass() = %v in %s", err, phase)
	}
	if _, kept := stalls.backoff[host(lately)]; !kept || len(stalls.backoff) != 1 {
		t.Errorf("%v later, %d backoffs kept (%s's among them: %v); want only that of %s, throttled by this pass",
			later, len(stalls.backoff), host(lately), kept, host(lately))
	}
}

// throttlingGateway answers each host's first POST 429 with no
// Retry-After, as API Gateway's throttling does, and places an order for
// each later one, a key's again replayed.
type throttlingGateway struct {
	mu     sync.Mutex
	posts  map[string]int    // by host
	orders map[string]string // by Idempotency-Key: the order placed
}

func (g *throttlingGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.posts[r.Host]++
	w.Header().Set("Content-Type", "application/json")
	if g.posts[r.Host] == 1 {
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"message":"Too Many Requests"}`))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	id, ok := g.orders[key]
	if !ok {
		id = fmt.Sprintf("ord_%d", len(g.orders)+1)
		g.orders[key] = id
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":%q,"host":%q,"status":"created"}`, id, r.Host)
}

// counts returns the POSTs host was sent and the orders placed there.
func (g *throttlingGateway) counts(host string) (posts, orders int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Keys are one per host here: order-NNN for shop-NNN.
	var n int
	if _, err := fmt.Sscanf(host, "shop-%d.example", &n); err == nil {
		if _, ok := g.orders[fmt.Sprintf("order-%03d", n)]; ok {
			orders = 1
		}
	}
	return g.posts[host], orders
}

// passingClock is time.Now moved on by what pass added, both its wall and
// its monotonic readings, as time passing moves them: no step.
// newMerchantsClient is a Client at default settings but for its clock
// (passingClock), journaled to a file, every host it sends to resolving
// to srv, as distinct custom domains of one gateway would; srv nil,
// sending nowhere.
func newMerchantsClient(t *testing.T, srv *httptest.Server) (*Client, *passingClock) {
	t.Helper()
	var opts []Option
	if srv != nil {
		var dialer net.Dialer
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, srv.Listener.Addr().String())
		}}}
		t.Cleanup(hc.CloseIdleConnections)
		opts = append(opts, WithHTTPClient(hc))
	}
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	clk := &passingClock{}
	c, err := New(store, append(opts, WithClock(clk))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk
}

type passingClock struct {
	realClock
	ahead atomic.Int64
}

func (c *passingClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// pass moves the clock d on.
func (c *passingClock) pass(d time.Duration) { c.ahead.Add(int64(d)) }
