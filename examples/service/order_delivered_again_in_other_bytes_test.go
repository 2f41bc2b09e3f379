package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idemkit/idem"
)

// stripeProvider answers as Stripe documents its idempotency keys
// (docs.stripe.com/api/idempotent_requests): the first request under a key
// executes and its status and body are stored; a later one with the same
// parameters gets that stored answer (Idempotent-Replayed: true); one with
// other parameters gets 400 idempotency_error, "Keys for idempotent
// requests can only be used with the same parameters they were first used
// with". Parameters are compared as the body's bytes (modelled). The
// first answer it gives is lost: the connection closes after the charge.
// While throttled it answers 429 rate_limit, nothing executed
// (docs.stripe.com/rate-limits).
type stripeProvider struct {
	srv *httptest.Server

	mu        sync.Mutex
	bodies    map[string][]byte // key → the body it was first used with
	charges   int
	answered  bool
	throttled int // how many of the next POSTs it answers 429
}

func newStripeProvider(t *testing.T) *stripeProvider {
	t.Helper()
	p := &stripeProvider{bodies: map[string][]byte{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		if r.Method != http.MethodPost {
			// Only a payment's POST charges; idem's probe of the host's
			// clock (a HEAD, read for its Date) makes nothing.
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.throttled > 0 {
			p.throttled--
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"code":"rate_limit","message":"Too many requests hit the API too quickly.","type":"invalid_request_error"}}`)
			return
		}
		first, held := p.bodies[key]
		switch {
		case held && !bytes.Equal(first, body):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.","type":"idempotency_error"}}`, key)
			return
		case held:
			w.Header().Set("Idempotent-Replayed", "true")
		default:
			p.bodies[key] = body
			p.charges++
		}
		if !p.answered {
			p.answered = true
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"pi_%s","object":"payment_intent","status":"succeeded"}`, key)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *stripeProvider) throttle(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttled = n
}

func (p *stripeProvider) chargeCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charges
}

// Replica A pays order 7 under the order's id; Stripe charges it, the
// answer is lost and A is killed before it can resend. The queue delivers
// the order again, to replica B on a journal of its own, whose release
// stamps each delivery in the body: the same order in other bytes. Stripe
// refuses the key as used with other parameters, and idem fails B's call
// (ErrFailed with ErrKeyConflict: nothing of B's executed) while A's
// payment stands. Told "refused", the customer pays again, a new order
// under a new id: a second charge. The service must hand the order to a
// person instead, who finds A's payment under the order's id.
func TestAnOrderDeliveredAgainInOtherBytesGoesToAPerson(t *testing.T) {
	p := newStripeProvider(t)
	ordersURL := p.srv.URL + "/orders"
	dir := t.TempDir()
	o := order{ID: "order-7", N: 7}

	paidByAKilledReplica(t, p, filepath.Join(dir, "a.journal"), o)

	ctx := context.Background()
	b, err := idem.Open(filepath.Join(dir, "b.journal"), idem.WithHTTPClient(p.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := submitStamped(ctx, b, ordersURL, o, "2026-12-07T20:15:00Z")
	if !errors.Is(err, idem.ErrFailed) || !errors.Is(err, idem.ErrKeyConflict) {
		t.Fatalf("B: err = %v; want ErrFailed with ErrKeyConflict (Stripe's idempotency_error)", err)
	}
	var calls tally
	if err := calls.add(res, err); err != nil {
		t.Fatalf("B: %v; want it journaled", err)
	}
	if calls != (tally{review: 1}) {
		t.Errorf("B's answer to the order's caller: %+v; want the order for a person, not settled (refused)", calls)
	}
	if calls.settled == 1 {
		// The checkout's caller, told the payment was refused, pays again.
		if _, err := submitOrder(ctx, b, ordersURL, order{ID: idem.NewKey(), N: o.N}); err != nil {
			t.Fatalf("the customer's second payment: %v", err)
		}
	}

	if n := p.chargeCount(); n != 1 {
		t.Errorf("Stripe charged order 7 %d times; want 1 (A's payment, which stands)", n)
	}
}

// paidByAKilledReplica is replica A, on the journal at path, killed
// while it pays o: Stripe charged it, the answer was lost.
func paidByAKilledReplica(t *testing.T, p *stripeProvider, path string, o order) {
	t.Helper()
	callCtx, kill := context.WithCancel(context.Background())
	defer kill()
	a, err := idem.Open(path,
		idem.WithHTTPClient(&http.Client{Transport: killAfterSubmit{base: p.srv.Client().Transport, kill: kill}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := submitOrder(callCtx, a, p.srv.URL+"/orders", o); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("A: err = %v; want ErrUnknownOutcome (killed mid-call)", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// submitStamped is submitOrder as a release would send it that stamps
// each delivery's time in the body: the same order, in other bytes.
func submitStamped(ctx context.Context, c *idem.Client, ordersURL string, o order, deliveredAt string) (*idem.Result, error) {
	return c.Submit(ctx, idem.Request{
		Key:  o.ID,
		Ref:  fmt.Sprintf("order-%d", o.N),
		URL:  ordersURL,
		Body: fmt.Appendf(nil, `{"order":%d,"amount":%d,"currency":"EUR","delivered_at":%q}`, o.N, 500+o.N, deliveredAt),
	})
}

// The service is killed while it pays order 7 (Stripe charged it, the
// answer was lost); the next start, a release that stamps each delivery
// in the body, resumes it on the same journal (settled succeeded), and
// the queue delivers the order again, never acked. Its id finds the
// journal's earlier call in other bytes: ErrKeyConflict, res nil, nothing
// sent. That is no "nothing journaled": answered as an error, the
// consumer leaves the message unacked and the queue delivers it again,
// each time refused the same way, for ever (README's default case would
// even retry it under a new key: a second charge). The order's earlier
// call stands, so a person looks it up under its id, and the delivery is
// answered once.
func TestAnOrderDeliveredAgainInOtherBytesToItsJournalGoesToAPerson(t *testing.T) {
	p := newStripeProvider(t)
	ordersURL := p.srv.URL + "/orders"
	path := filepath.Join(t.TempDir(), "service.journal")
	o := order{ID: "order-7", N: 7}

	callCtx, kill := context.WithCancel(context.Background())
	defer kill()
	first, err := idem.Open(path,
		idem.WithHTTPClient(&http.Client{Transport: killAfterSubmit{base: p.srv.Client().Transport, kill: kill}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := submitStamped(callCtx, first, ordersURL, o, "2026-12-07T20:00:00Z"); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("first start: err = %v; want ErrUnknownOutcome (killed mid-call)", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	next, err := idem.Open(path, idem.WithHTTPClient(p.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if sum, err := next.Resume(ctx); err != nil || sum.Succeeded != 1 {
		t.Fatalf("Resume: %+v, %v; want the order's earlier call settled succeeded", sum, err)
	}

	// The queue delivers the order until its consumer answers it; 5
	// deliveries stand for "for ever".
	var calls tally
	deliveries := 0
	for acked := false; !acked && deliveries < 5; {
		deliveries++
		res, err := submitStamped(ctx, next, ordersURL, o, fmt.Sprintf("2026-12-07T20:%02d:00Z", 15+deliveries))
		if deliveries == 1 && (!errors.Is(err, idem.ErrKeyConflict) || errors.Is(err, idem.ErrFailed) || res != nil) {
			t.Fatalf("delivery 1: %+v, %v; want the journal's ErrKeyConflict, res nil", res, err)
		}
		acked = calls.add(res, err) == nil
	}
	if deliveries != 1 || calls != (tally{review: 1}) {
		t.Errorf("the order was delivered %d times, answered %+v; want once, for a person", deliveries, calls)
	}
	if n := p.chargeCount(); n != 1 {
		t.Errorf("Stripe charged order 7 %d times; want 1", n)
	}
}
