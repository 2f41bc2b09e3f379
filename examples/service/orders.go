package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// orderBook is the service's own record of how each order's payment
// stands: a table in its database in a real service, which outlives the
// process (here a map, which the tests keep across a restart).
type orderBook struct {
	mu     sync.Mutex
	orders map[orderKey]orderRecord
}

// orderKey is an order's operation: its scope (a merchant's account, or
// idem.DefaultScope) and key (the order's id). Two accounts' order 1001
// are two orders.
type orderKey struct{ Scope, ID string }

// orderRecord is one order's payment as the service knows it.
type orderRecord struct {
	State      string // orderConfirming, orderPaid, orderRefused or orderForReview
	ResourceID string // the provider's payment, once paid
}

const (
	orderConfirming = "confirming" // the caller was told "accepted, confirming"
	orderPaid       = "paid"
	orderRefused    = "refused"
	orderForReview  = "review" // settled, but a person must look (Result.Review, KeyConflict)
)

func newOrderBook() *orderBook { return &orderBook{orders: map[orderKey]orderRecord{}} }

// confirming records that the order's caller was told "accepted,
// confirming". An outcome recorded already stays: the settle func may
// have run between Submit's return and this write.
func (b *orderBook) confirming(scope, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.orders[orderKey{scope, id}]; !ok {
		b.orders[orderKey{scope, id}] = orderRecord{State: orderConfirming}
	}
	return nil
}

// settle records a settled operation's outcome as its order's: refused
// only when the server refused the order, not its id as a key.
func (b *orderBook) settle(res *idem.Result) error {
	rec := orderRecord{State: orderRefused}
	switch {
	case res.Review != "", res.KeyConflict:
		// KeyConflict: the order's id was refused as used with another
		// body, an earlier call's for this order, which may have paid.
		rec.State = orderForReview
	case res.State == idem.StateSucceeded:
		rec = orderRecord{State: orderPaid, ResourceID: res.ResourceID}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.orders[orderKey{res.Scope, res.Key}] = rec
	return nil
}

// get returns the order's record.
func (b *orderBook) get(scope, id string) (orderRecord, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec, ok := b.orders[orderKey{scope, id}]
	return rec, ok
}

// confirmingOrders lists the orders still "confirming".
func (b *orderBook) confirmingOrders() []orderKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ks []orderKey
	for k, rec := range b.orders {
		if rec.State == orderConfirming {
			ks = append(ks, k)
		}
	}
	return ks
}

// settleFunc is the service's WithSettleFunc callback: it records the
// outcome as the order's. It returns nothing, so a write the database
// refuses can only be logged: the order stays "confirming", and
// settleConfirming records it on its next sweep.
func settleFunc(b *orderBook, log *slog.Logger) func(*idem.Result) {
	return func(res *idem.Result) {
		if err := b.settle(res); err != nil {
			log.Warn("order settled but not recorded; the next sweep records it", "key", res.Key, "state", res.State, "err", err)
		}
	}
}

// settleConfirming records the outcome of each order still "confirming"
// whose operation the journal holds settled, and returns how many it
// recorded. The settle func is called once, after the outcome is
// committed: a process killed between the two, or a write of the
// callback that failed, leaves an order paid at the provider and
// "confirming" here for ever, and Resume, which visits open operations
// only, never reports it again. So the service sweeps at start-up, before
// Run prunes what was settled longer ago than WithRetainSettled, and now
// and then while it runs.
func settleConfirming(ctx context.Context, c *idem.Client, b *orderBook, log *slog.Logger) (int, error) {
	n := 0
	for _, k := range b.confirmingOrders() {
		id := k.ID
		op, err := c.Lookup(ctx, k.Scope, id) // under its scope: another account's order id is another order
		if errors.Is(err, idem.ErrNotFound) {
			// Submit journaled it before answering "confirming": pruned,
			// settled longer ago than WithRetainSettled. The provider knows.
			log.Error("order confirming, its operation pruned: look it up at the provider", "scope", k.Scope, "key", id)
			continue
		}
		if errors.Is(err, journal.ErrVersion) {
			// A newer release journaled it and was rolled back. Resume
			// and Run go past such a record; so does the sweep, or one
			// order would keep the service from starting and every
			// order after it "confirming". The newer release records it.
			log.Warn("order confirming, its operation written by a newer idem: upgrade to record it", "scope", k.Scope, "key", id)
			continue
		}
		if err != nil {
			return n, err
		}
		if !op.State.Terminal() {
			continue // Resume or Run settles it and calls the settle func
		}
		res := op.Result
		if res == nil { // settled with no answer recorded (by hand)
			res = &idem.Result{Scope: op.Scope, Key: op.Key, State: op.State, Review: op.Review}
		}
		if err := b.settle(res); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
