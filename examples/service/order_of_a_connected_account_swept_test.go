package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// A service paying for many merchants' accounts journals each order under
// its account as the scope (README, one Client for many accounts): two
// accounts' order 1001 are two operations. Its start-up sweep looked each
// "confirming" order up under the default scope: ErrNotFound, logged
// "pruned", and the order settled paid under its account stayed
// "confirming" for ever. It now looks it up under the order's own scope.
func TestTheSweepRecordsAConnectedAccountsOrderUnderItsScope(t *testing.T) {
	srv, err := idemtest.NewServer()
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
	ctx := context.Background()
	body := []byte(`{"order":1001,"amount":1501,"currency":"EUR"}`)
	// acct_b's order 1001 settled paid, its settle func never run (the
	// process killed after the commit); acct_a's is still open.
	paid, err := c.Submit(ctx, idem.Request{Scope: "acct_b", Key: "1001", URL: srv.URL + "/orders", Body: body})
	if err != nil || paid.State != idem.StateSucceeded {
		t.Fatalf("acct_b's order: %+v, %v; want succeeded", paid, err)
	}
	if _, err := c.Prepare(ctx, idem.Request{Scope: "acct_a", Key: "1001", URL: srv.URL + "/orders", Body: body}); err != nil {
		t.Fatal(err)
	}
	book := newOrderBook()
	for _, acct := range []string{"acct_a", "acct_b"} {
		if err := book.confirming(acct, "1001"); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := settleConfirming(ctx, c, book, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || n != 1 {
		t.Fatalf("settleConfirming: %d, %v; want acct_b's order recorded", n, err)
	}
	if rec, _ := book.get("acct_b", "1001"); rec.State != orderPaid || rec.ResourceID != paid.ResourceID {
		t.Errorf("acct_b's order 1001 = %+v; want paid with %q", rec, paid.ResourceID)
	}
	if rec, _ := book.get("acct_a", "1001"); rec.State != orderConfirming {
		t.Errorf("acct_a's order 1001 = %+v; want still confirming (its operation is open)", rec)
	}
	if n := srv.Stats().SideEffects; n != 1 {
		t.Errorf("orders made at the provider = %d; want 1", n)
	}
}
