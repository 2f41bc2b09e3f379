package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
)

// Replica A pays order 7 under the order's id; Stripe charges it, the
// answer is lost and A is killed. The queue delivers the order again, to
// replica B on a journal of its own, whose release stamps each delivery
// in the body. Stripe rate-limits B's first send (429: nothing executed)
// and B's caller gives up: the order is "confirming". B's Resume resends,
// and Stripe refuses the key as used with other parameters (400
// idempotency_error, docs.stripe.com/api/idempotent_requests): settled
// failed, no review, which the settle func and the sweep recorded
// "refused", though A's payment stands; the customer, told so, paid
// again: 2 charges. The Result says KeyConflict, and the service hands
// the order to a person: 1 charge.
func TestAnOrderRefusedInTheBackgroundAsUsedWithOtherBytesGoesToAPerson(t *testing.T) {
	p := newStripeProvider(t)
	ordersURL := p.srv.URL + "/orders"
	dir := t.TempDir()
	o := order{ID: "order-7", N: 7}

	paidByAKilledReplica(t, p, filepath.Join(dir, "a.journal"), o)

	book := newOrderBook()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p.throttle(1)
	bCtx, endB := context.WithCancel(context.Background())
	defer endB()
	b, err := idem.Open(filepath.Join(dir, "b.journal"),
		idem.WithHTTPClient(&http.Client{Transport: killAfterSubmit{base: p.srv.Client().Transport, kill: endB}}),
		idem.WithSettleFunc(settleFunc(book, log)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := submitStamped(bCtx, b, ordersURL, o, "2026-12-07T20:15:00Z")
	var calls tally
	if err := calls.add(res, err); err != nil {
		t.Fatalf("B: %v; want it journaled", err)
	}
	if calls != (tally{handedOff: 1}) {
		t.Fatalf("B's call: %+v, %v; want handed off (429, then its caller gave up)", calls, err)
	}
	if err := book.confirming(idem.DefaultScope, o.ID); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	if sum, err := b.Resume(ctx); err != nil || sum.Failed != 1 {
		t.Fatalf("Resume: %+v, %v; want the resend refused (Stripe's idempotency_error)", sum, err)
	}
	rec, _ := book.get(idem.DefaultScope, o.ID)
	if rec.State != orderForReview {
		t.Errorf("the settle func recorded order 7 %+v; want %q: A's payment under its id stands", rec, orderForReview)
	}
	// Killed before the settle func ran, the next start's sweep records it.
	book.orders[orderKey{idem.DefaultScope, o.ID}] = orderRecord{State: orderConfirming}
	if n, err := settleConfirming(ctx, b, book, log); err != nil || n != 1 {
		t.Fatalf("settleConfirming: %d, %v; want the order recorded", n, err)
	}
	if swept, _ := book.get(idem.DefaultScope, o.ID); swept.State != orderForReview {
		t.Errorf("the sweep recorded order 7 %+v; want %q", swept, orderForReview)
	}
	if swept, _ := book.get(idem.DefaultScope, o.ID); swept.State == orderRefused {
		rec = swept
	}
	if rec.State == orderRefused {
		// The customer, told the payment was refused, pays again.
		if _, err := submitOrder(ctx, b, ordersURL, order{ID: idem.NewKey(), N: o.N}); err != nil {
			t.Fatalf("the customer's second payment: %v", err)
		}
	}
	if n := p.chargeCount(); n != 1 {
		t.Errorf("Stripe charged order 7 %d times; want 1 (A's payment, which stands)", n)
	}
}
