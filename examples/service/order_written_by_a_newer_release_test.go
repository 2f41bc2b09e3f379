package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// A newer release handed an order off ("accepted, confirming"), and was
// rolled back: the journal holds that order's operation in a record
// version this build cannot read, and Lookup of its key fails with
// journal.ErrVersion, as it is meant to (Resume and Run go past such a
// record, so that one record a rollback left does not stop every other
// order). The start-up sweep returned that error, and the service
// refused to start: no order served, and another order, settled paid
// while its settle func went untold, left "confirming" for ever. The
// service must start, record the other order paid, and leave the newer
// one to the newer release.
func TestAServiceRolledBackPastANewerReleasesOrderStartsAndRecordsTheOthers(t *testing.T) {
	srv, err := idemtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "service.journal")
	book := newOrderBook()
	newer, other := order{ID: idem.NewKey(), N: 1}, order{ID: idem.NewKey(), N: 2}
	for _, o := range []order{newer, other} {
		killedAfterTheProviderCharged(t, srv, path, o)
		if err := book.confirming(idem.DefaultScope, o.ID); err != nil {
			t.Fatal(err)
		}
	}

	// Both settled with nobody told (the process killed after the
	// commit), then the rollback.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	settler, err := idem.Open(path, idem.WithResultEndpoint(srv.ResultTemplate()))
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := settler.Resume(ctx); err != nil || sum.Succeeded != 2 {
		t.Fatalf("Resume = %+v, %v; want both settled succeeded", sum, err)
	}
	if err := settler.Close(); err != nil {
		t.Fatal(err)
	}
	journaltest.MakeNewer(t, path, idem.DefaultScope, newer.ID)

	var logged bytes.Buffer
	cfg := defaultConfig()
	cfg.Journal = path
	cfg.orders = book
	cfg.MaxOrders = 0
	cfg.OpsAddr = "127.0.0.1:0"
	if _, err := run(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil))); err != nil {
		t.Fatalf("run() error = %v; want the service started past the record a newer idem wrote", err)
	}
	if rec, _ := book.get(idem.DefaultScope, other.ID); rec.State != orderPaid || rec.ResourceID == "" {
		t.Errorf("the service's record of the other order = %+v; want paid, with the provider's payment", rec)
	}
	if rec, _ := book.get(idem.DefaultScope, newer.ID); rec.State != orderConfirming {
		t.Errorf("the service's record of the newer release's order = %+v; want still confirming, for the newer release", rec)
	}
	if !strings.Contains(logged.String(), "key="+newer.ID) {
		t.Errorf("log does not name the order a newer idem journaled:\n%s", logged.String())
	}
	after, err := idem.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if _, err := after.Lookup(ctx, "", newer.ID); !errors.Is(err, journal.ErrVersion) {
		t.Errorf("Lookup of the newer release's order: err = %v; want journal.ErrVersion, its record untouched", err)
	}
	for _, o := range []order{newer, other} {
		if n := srv.Effects("", o.ID); n != 1 {
			t.Errorf("charges at the provider for order %d = %d; want 1", o.N, n)
		}
	}
}
