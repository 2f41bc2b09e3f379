package main

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// A provider sends an event again only when its delivery was not
// acknowledged: Stripe retries a delivery answered other than 2xx (or
// not answered in time) with exponential backoff for up to three days in
// live mode, and never one it got a 2xx for (https://docs.stripe.com/webhooks,
// "Retry behavior"); the fake server does the same within its bounds
// (idemtest.Webhook.Retries). Confirm's doc asks for exactly that: an
// event whose Confirm failed on the journal is answered with a 5xx, never
// acknowledged and dropped. Here the journal fails the first Confirm once
// (a full disk): the event must come back and settle its order.
func TestConfirmJournalErrorRedelivered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errJournal := errors.New("journal: write orders.journal: no space left on device")
	var mu sync.Mutex
	var failedID string
	var calls, okAfter int // calls of Confirm for the failed event; those that succeeded
	wrap := func(next confirmFunc) confirmFunc {
		return func(ctx context.Context, scope, key string, c idem.Confirmation) (*idem.Result, error) {
			mu.Lock()
			first := failedID == ""
			if first {
				failedID = c.EventID
			}
			mine := c.EventID == failedID
			if mine {
				calls++
			}
			mu.Unlock()
			if first {
				return nil, errJournal
			}
			res, err := next(ctx, scope, key, c)
			if mine && err == nil {
				mu.Lock()
				okAfter++
				mu.Unlock()
			}
			return res, err
		}
	}
	var out bytes.Buffer
	rep, err := run(ctx, &out, wrap)
	if err != nil {
		t.Fatalf("run: %v (the event was acknowledged, then dropped: the provider never sends it again)\n%s", err, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if failedID == "" {
		t.Fatalf("no event was confirmed\n%s", out.String())
	}
	if rep.Retried != 1 {
		t.Errorf("provider retried %d deliveries; want 1: the one whose Confirm failed, answered 5xx", rep.Retried)
	}
	if calls < 2 || okAfter < 1 {
		t.Errorf("event %s: %d Confirm calls, %d succeeded after the failure; want it redelivered and confirmed", failedID, calls, okAfter)
	}
	if rep.Review != 0 || rep.Succeeded != orders-1 || rep.Failed != 1 || rep.SettledByEvent != 1 || rep.Duplicates != 0 {
		t.Errorf("report = %+v; want every order settled, the lost one by its event, none in review\n%s", rep, out.String())
	}
}
