package main

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// killAfterSubmit stands for the process dying: once the first submit has
// reached the provider (which took it, and whose answer was lost), the
// call in flight is abandoned before it can learn more.
type killAfterSubmit struct {
	base http.RoundTripper
	kill context.CancelFunc
}

func (k killAfterSubmit) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(r)
	if r.Method == http.MethodPost {
		k.kill()
	}
	return resp, err
}

// killedAfterTheProviderCharged is a first process, on the journal at
// path, killed while it pays for o: the provider made the order and its
// answer was lost, so the call ends in ErrUnknownOutcome.
func killedAfterTheProviderCharged(t *testing.T, srv *idemtest.Server, path string, o order) {
	t.Helper()
	if err := srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit}); err != nil {
		t.Fatal(err)
	}
	callCtx, kill := context.WithCancel(context.Background())
	defer kill()
	first, err := idem.Open(path,
		idem.WithHTTPClient(&http.Client{Transport: killAfterSubmit{base: srv.Client().Transport, kill: kill}}),
		idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := submitOrder(callCtx, first, srv.URL+"/orders", o); !errors.Is(err, idem.ErrUnknownOutcome) {
		t.Fatalf("first submitOrder: err = %v; want ErrUnknownOutcome (killed mid-call)", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
}

// The service is killed while it pays for an order: the provider made the
// order and its answer was lost. Nobody answered the order's caller, so
// it delivers the order again to the next start (a queue's redelivery of
// a message never acknowledged, a load balancer's retry on another
// start). The provider tells requests apart by their idempotency key only
// (Stripe: "subsequent requests with the same key return the same
// result", docs.stripe.com/api/idempotent_requests), so submitOrder must
// send the order under the key it was journaled with the first time.
func TestAnOrderDeliveredAgainAfterAKillIsPaidOnce(t *testing.T) {
	srv, err := idemtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "service.journal")
	ordersURL := srv.URL + "/orders"
	o := order{ID: idem.NewKey(), N: 7}
	killedAfterTheProviderCharged(t, srv, path, o)

	// The next start: Resume, then the order delivered again.
	ctx := context.Background()
	next, err := idem.Open(path, idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if _, err := next.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := submitOrder(ctx, next, ordersURL, o)
	if err != nil {
		t.Fatalf("submitOrder of the order delivered again: %v", err)
	}
	if res.State != idem.StateSucceeded {
		t.Errorf("state = %s; want succeeded", res.State)
	}

	if n := srv.Stats().SideEffects; n != 1 {
		t.Errorf("orders made at the provider = %d; want 1", n)
	}
	ops, err := next.List(ctx, idem.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 {
		t.Errorf("journaled operations = %d; want 1", len(ops))
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && r.Key != o.ID {
			t.Errorf("a submit carried key %q; want the order's id %q", r.Key, o.ID)
		}
	}
}
