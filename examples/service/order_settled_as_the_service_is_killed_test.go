package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The child's environment: the journal it resumes and the result
// endpoint it asks.
const (
	killedJournalEnv = "IDEM_SERVICE_KILLED_JOURNAL"
	killedResultEnv  = "IDEM_SERVICE_KILLED_RESULT"
)

// An order answered "accepted, confirming" is settled paid by the next
// start's Resume, and the process is killed (SIGKILL, a deploy's or the
// OOM killer's) after the settlement's commit, before the settle func
// ran: the provider charged once, the journal says succeeded, the
// service's own record says "confirming". Resume visits open operations
// only and Run settled ones never, so no later process calls the settle
// func for it: the order stayed "confirming" for ever, charged and never
// shipped. The start after that must record it paid (settleConfirming,
// by Lookup of each order still confirming).
func TestAnOrderSettledAsTheServiceIsKilledIsRecordedPaidAtTheNextStart(t *testing.T) {
	srv, err := idemtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "service.journal")
	book := newOrderBook() // the service's database: it outlives each process
	o := order{ID: idem.NewKey(), N: 1}

	// The first process: the provider charges, its answer is lost, and
	// the caller is told "accepted, confirming".
	killedAfterTheProviderCharged(t, srv, path, o)
	if err := book.confirming(idem.DefaultScope, o.ID); err != nil {
		t.Fatal(err)
	}

	// The second process: its Resume settles the order and it is killed
	// right after the commit.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestServiceKilledAfterASettlementChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), killedJournalEnv+"="+path, killedResultEnv+"="+srv.ResultTemplate())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: err = %v; want it killed\n%s", err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v; want killed after the settlement's commit\n%s", err, out)
	}

	// The third process: the service's own start-up.
	cfg := defaultConfig()
	cfg.Journal = path
	cfg.orders = book
	cfg.MaxOrders = 0
	cfg.OpsAddr = "127.0.0.1:0"
	rep, err := run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resumed.Visited != 0 || rep.SettledInBackground != 0 {
		t.Errorf("Resume visited %d, settle func called %d times; want 0 and 0: the settlement was committed before the kill",
			rep.Resumed.Visited, rep.SettledInBackground)
	}
	after, err := idem.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if op, err := after.Lookup(ctx, "", o.ID); err != nil || op.State != idem.StateSucceeded {
		t.Errorf("journaled operation = %+v, %v; want succeeded", op, err)
	}

	if n := srv.Effects("", o.ID); n != 1 {
		t.Errorf("charges at the provider for the order = %d; want 1", n)
	}
	if n := srv.Stats().SideEffects; n != 1 {
		t.Errorf("orders made at the provider = %d; want 1", n)
	}
	rec, _ := book.get(idem.DefaultScope, o.ID)
	if rec.State != orderPaid || rec.ResourceID == "" {
		t.Errorf("the service's record of the order = %+v; want paid, with the provider's payment", rec)
	}
}

// TestServiceKilledAfterASettlementChild is the second process of the
// test above: it resumes the journal and kills itself in the Settle hook,
// which runs once the settlement is committed and before the settle func.
func TestServiceKilledAfterASettlementChild(t *testing.T) {
	path := os.Getenv(killedJournalEnv)
	if path == "" {
		t.Skip("run by TestAnOrderSettledAsTheServiceIsKilledIsRecordedPaidAtTheNextStart")
	}
	c, err := idem.Open(path,
		idem.WithResultEndpoint(os.Getenv(killedResultEnv)),
		idem.WithHooks(idem.Hooks{Settle: func(context.Context, *idem.Result) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}}),
		idem.WithSettleFunc(settleFunc(newOrderBook(), slog.New(slog.NewTextHandler(os.Stderr, nil)))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum, err := c.Resume(t.Context())
	t.Fatalf("Resume returned (%+v, %v) without settling the order", sum, err)
}
