package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The provider already holds the order's id as the key of another request
// (another service paying with the same ids on the same account, or an id
// the caller reused) and answers with that request's stored result:
// PayPal "returns the latest status of the previous request that used
// that same header" (developer.paypal.com/reference/guidelines/idempotency),
// modelled by idemtest's NoBodyCompare. idem cannot tell whose payment
// that is and flags the order ReviewKeyInUse. The service must hand it to
// a person: not mark it paid, and not tell the customer "confirming"
// while it waits for Run, which never clears the flag.
func TestAnOrderWhoseIdAnotherRequestHeldGoesToAPerson(t *testing.T) {
	srv, err := idemtest.NewServer(idemtest.WithBehavior(idemtest.NoBodyCompare()))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := idem.Open(filepath.Join(t.TempDir(), "service.journal"),
		idem.WithHTTPClient(srv.Client()), idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := order{ID: idem.NewKey(), N: 7}
	if err := srv.Preempt("", o.ID, 0); err != nil {
		t.Fatal(err)
	}

	res, err := submitOrder(context.Background(), c, srv.URL+"/orders", o)
	var calls tally
	if err := calls.add(res, err); err != nil {
		t.Fatalf("submitOrder: %v; want it journaled", err)
	}
	if calls != (tally{review: 1}) {
		t.Errorf("calls = %+v; want the one order for review, neither settled nor handed off", calls)
	}
	if res == nil || res.Review != idem.ReviewKeyInUse {
		t.Errorf("result = %+v; want flagged %q", res, idem.ReviewKeyInUse)
	}
	if st := srv.KeyStats("", o.ID); st.Effects != 0 || st.ForeignEffects != 1 {
		t.Errorf("server: %+v; want no order of ours, the other request's one", st)
	}
}
