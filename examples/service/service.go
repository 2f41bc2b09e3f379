package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// token scopes the service's keys on the fake server, which reads the
// Authorization header. It is added at send time, never journaled.
const token = "Bearer sk_test_service"

// report is what the service did, for its test and its last log line.
type report struct {
	Resumed             idem.Summary
	Taken               int // orders submitted
	SettledInCall       int
	HandedOff           int // ErrUnknownOutcome: the reconciler owns them
	Review              int // ErrNeedsReview or Result.Review: a person owns them
	SettledInBackground int // reported by WithSettleFunc (Resume and Run)
	OpenAtExit          int // left for the next start
	Duplicates          int // from the fake server's counters
}

// run is the service: open, resume, reconcile in the background, serve
// until ctx ends, shut down.
func run(ctx context.Context, cfg config, log *slog.Logger) (report, error) {
	var rep report
	srv, err := idemtest.NewServer(
		idemtest.WithSeed(1),
		idemtest.WithProfile(idemtest.Profile{
			Rates: map[idemtest.FaultKind]float64{
				idemtest.Unavailable:     0.15,
				idemtest.SlowProcessing:  0.10,
				idemtest.DropAfterCommit: 0.10,
			},
			Delay:      time.Second,
			RetryAfter: time.Second,
		}),
	)
	if err != nil {
		return rep, err
	}
	defer srv.Close()
	ordersURL := srv.URL + "/orders"

	path := cfg.Journal
	if path == "" {
		dir, err := os.MkdirTemp("", "idem-service-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "service.journal")
		// A fresh journal has nothing to resume: pretend a previous
		// process journaled three orders and died before sending them.
		if err := simulatePreviousProcess(path, ordersURL); err != nil {
			return rep, err
		}
		log.Info("simulated a previous process that died with 3 orders journaled and unsent", "journal", path)
	}

	tel, err := newTelemetry()
	if err != nil {
		return rep, err
	}
	defer tel.provider.Shutdown(context.WithoutCancel(ctx))
	var settledBg atomic.Int64
	book := cfg.orders
	if book == nil {
		book = newOrderBook()
	}
	markOrder := settleFunc(book, log)
	hc := srv.Client()
	if cfg.provider != nil {
		hc.Transport = cfg.provider(hc.Transport)
	}
	openClient := idem.Open
	if cfg.open != nil {
		openClient = cfg.open
	}
	c, err := openClient(path,
		idem.WithHooks(tel.inst.Hooks()),
		idem.WithHTTPClient(hc),
		idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", token)
			return nil
		}),
		idem.WithLogger(log.With("component", "idem")),
		idem.WithMaxElapsed(cfg.MaxElapsed),
		idem.WithAttemptTimeout(time.Second),
		idem.WithBackoff(func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
				backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
		}),
		idem.WithReconcile(250*time.Millisecond, 2*time.Second, 72*time.Hour),
		idem.WithSettleFunc(func(res *idem.Result) {
			// The service marks its order paid, refused or for a
			// person (Review, KeyConflict) here. Once
			// only, after the commit: settleConfirming sweeps up what a
			// kill or a failed write in between left "confirming".
			markOrder(res)
			settledBg.Add(1)
			log.Info("settled in the background", "key", res.Key, "state", res.State, "resource_id", res.ResourceID)
		}),
	)
	if err != nil {
		return rep, err // journal.ErrLocked: another process owns this journal
	}
	defer c.Close()
	gauges, err := tel.inst.Observe(c)
	if err != nil {
		return rep, err
	}
	defer gauges.Unregister()
	opsURL, stopOps, err := serveOps(cfg.OpsAddr, c, tel, log)
	if err != nil {
		return rep, err
	}
	defer stopOps()

	// Start-up: first record the orders the last process settled but
	// never told (killed after the commit, before its settle func), before
	// Run prunes them; then settle what it left open, before new work,
	// for at most cfg.Startup. A Resume that takes longer (a backlog of
	// thousands, a provider answering slowly) goes on while the service
	// serves, and Run settles what it leaves. Exiting instead would never
	// serve: the next start meets the same backlog and exits again, and
	// each cut Resume leaves what it was sending unknown.
	// Stopped at shutdown, as the reconciler is, not by ctx: cut at the
	// end of -duration it would be an error.
	if n, err := settleConfirming(ctx, c, book, log); err != nil {
		return rep, fmt.Errorf("recording orders settled before the restart: %w", err)
	} else if n > 0 {
		log.Info("recorded orders the last process settled but never told", "orders", n)
	}
	resumeCtx, stopResume := context.WithCancel(context.WithoutCancel(ctx))
	defer stopResume()
	type resumed struct {
		sum idem.Summary
		err error
	}
	resumeDone := make(chan resumed, 1)
	go func() {
		sum, err := c.Resume(resumeCtx)
		if err == nil {
			log.Info("resumed", "visited", sum.Visited, "succeeded", sum.Succeeded, "failed", sum.Failed,
				"still_open", sum.Processing+sum.Unknown+sum.Pending+sum.Deferred,
				"deferred_to_run", sum.Deferred, "review", sum.Review)
		}
		resumeDone <- resumed{sum, err}
	}()
	var resumeRes *resumed                    // set once Resume has returned
	var resumeEnd <-chan resumed = resumeDone // where shutdown hears its end
	startup := time.NewTimer(cfg.Startup)
	select {
	case r := <-resumeDone:
		startup.Stop()
		if r.err != nil {
			// The journal cannot be read or written, or ctx ended.
			return rep, fmt.Errorf("resume: %w", r.err)
		}
		resumeRes = &r
	case <-startup.C:
		log.Warn("resume outlasts the start-up bound: serving while it goes on; the reconciler settles what it leaves",
			"startup", cfg.Startup)
		// Its failure is logged when it comes, not at shutdown: a journal
		// that cannot be read or written is the operator's to hear while
		// the service serves on it. Shutdown still returns it.
		late := make(chan resumed, 1)
		resumeEnd = late
		go func() {
			r := <-resumeDone
			if r.err != nil && resumeCtx.Err() == nil {
				log.Error("resume failed while serving: the reconciler settles what it left", "err", r.err)
			}
			late <- r
		}()
	case <-ctx.Done(): // stopped during start-up: shut down below
		startup.Stop()
	}

	// The reconciler lives until shutdown, after the last call in flight.
	// Beside a Resume still going on, no operation is driven twice at
	// once: Run's pass claims none whose lease a drive holds, this
	// Client's included, and a drive of an operation already under way
	// in this Client joins that drive. (Resume's claim, unlike Run's,
	// takes its own owner's lease anew: one Run claimed but has not yet
	// started is fenced, and Run's visit of it joins Resume's or is
	// refused its first write, before any send.)
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()
	// A settle func whose write failed left its order "confirming": the
	// sweep records it while the journal still holds the settlement.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		sweep := time.NewTicker(sweepEvery)
		defer sweep.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-sweep.C:
			}
			if _, err := settleConfirming(runCtx, c, book, log); err != nil && runCtx.Err() == nil {
				log.Warn("sweep of confirming orders", "err", err)
			}
		}
	}()

	log.Info("serving", "every", cfg.Every, "max_orders", cfg.MaxOrders)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		calls tally
	)
	// Calls in flight at shutdown get cfg.Drain to finish; they are not
	// cancelled by the signal.
	callCtx, stopCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCalls()
	tick := time.NewTicker(cfg.Every)
serve:
	for rep.Taken < cfg.MaxOrders {
		select {
		case <-ctx.Done():
			break serve
		case <-tick.C:
		}
		rep.Taken++
		n := rep.Taken
		// A real service is handed the order's id by its caller (the
		// checkout's order, the queue message's); this made-up order
		// gets one here.
		o := order{ID: idem.NewKey(), N: n}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := submitOrder(callCtx, c, ordersURL, o)
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, idem.ErrUnknownOutcome) {
				// The caller is told "accepted, confirming": the settle
				// func or settleConfirming records the outcome, under
				// the scope the settle func's Result names.
				scope := idem.DefaultScope
				if res != nil {
					scope = res.Scope
				}
				if err := book.confirming(scope, o.ID); err != nil {
					log.Error("order confirming not recorded", "order", n, "key", o.ID, "err", err)
				}
			}
			if err := calls.add(res, err); err != nil {
				log.Error("order not journaled", "order", n, "err", err)
			} else if errors.Is(err, idem.ErrKeyConflict) && !errors.Is(err, idem.ErrNeedsReview) {
				// No flag in the journal lists it for a person (the
				// admin handler lists flagged ones): this line does.
				log.Warn("order for a person: its id is held by an earlier call in other bytes; look it up under the id",
					"order", n, "key", o.ID, "err", err)
			}
		}()
	}
	tick.Stop()
	if cfg.Inspect != nil {
		cfg.Inspect(opsURL)
	}

	// Shutdown. The calls are drained by hand rather than with
	// c.Shutdown, which would close the journal: this example still lists
	// what is left open, for its report. A service without that report
	// calls c.Shutdown(drainCtx) and is done.
	log.Info("shutting down: no new orders; draining calls in flight", "drain", cfg.Drain)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(cfg.Drain):
		stopCalls() // they stay journaled, unknown: the next start resumes them
		<-drained
	}
	stopRun()
	<-sweepDone
	if resumeRes == nil {
		// What it did not reach stays open for the next start.
		stopResume()
		r := <-resumeEnd
		resumeRes = &r
	}
	rep.Resumed = resumeRes.sum
	if err := <-runDone; err != nil && !errors.Is(err, context.Canceled) {
		return rep, fmt.Errorf("reconciler: %w", err)
	}
	if err := resumeRes.err; err != nil && !errors.Is(err, context.Canceled) {
		return rep, fmt.Errorf("resume: %w", err)
	}
	open, err := c.List(context.WithoutCancel(ctx), idem.Filter{States: []idem.State{idem.StatePending, idem.StateProcessing, idem.StateUnknown}})
	if err != nil {
		return rep, err
	}
	mu.Lock()
	rep.SettledInCall, rep.HandedOff, rep.Review = calls.settled, calls.handedOff, calls.review
	mu.Unlock()
	rep.SettledInBackground = int(settledBg.Load())
	rep.OpenAtExit = len(open)
	if rep.Duplicates, err = duplicates(context.WithoutCancel(ctx), c, srv); err != nil {
		return rep, err
	}
	log.Info("stopped", "open_for_next_start", rep.OpenAtExit, "server_side_duplicates", rep.Duplicates)
	return rep, nil
}

// sweepEvery spaces the sweeps of orders left "confirming" while the
// service runs: well within WithRetainSettled (7 days by default).
const sweepEvery = time.Minute

// order is one order the service is asked to pay for. ID is the order's
// own id, the same each time the order is delivered.
type order struct {
	ID string
	N  int
}

// submitOrder pays for o under its own id as the key. A key made up per
// call (an empty Key) would make each delivery of the order a new
// payment: one delivered again after this process was killed mid-call,
// or retried by a load balancer on another start, is paid twice while
// Resume settles the first. Under the order's id, it finds the journaled
// operation and its outcome instead, in this journal only: replicas that
// may each be handed the order share one (pgjournal), or a copy on a
// journal of its own may be paid twice (README, "Which journal"). So the
// id must name this order alone, for good (not a counter that starts
// again): a reused id with the same body is answered with the earlier
// order's payment.
func submitOrder(ctx context.Context, c *idem.Client, ordersURL string, o order) (*idem.Result, error) {
	return c.Submit(ctx, idem.Request{
		Key:  o.ID,
		Ref:  fmt.Sprintf("order-%d", o.N),
		URL:  ordersURL,
		Body: fmt.Appendf(nil, `{"order":%d,"amount":%d,"currency":"EUR"}`, o.N, 500+o.N),
	})
}

// tally counts how the service answers each order's caller: the three
// outcomes README's "Use" switch tells apart.
type tally struct{ settled, handedOff, review int }

// add counts one submitOrder call; it returns err when nothing was
// journaled for it.
func (t *tally) add(res *idem.Result, err error) error {
	switch {
	case errors.Is(err, idem.ErrNeedsReview), err == nil && res.Review != "":
		// A person settles it (the admin handler lists it; Resolve), not
		// Run: it may be paid twice (no error: mark it paid, refund the
		// copy), or the server answered for another request under its key.
		// Never pay it again.
		t.review++
	case errors.Is(err, idem.ErrKeyConflict):
		// The order's id is a key used with another body: an earlier
		// call for this order, in other bytes (a newer release's, a
		// replica's on its own journal), which may have paid. The server
		// refused it (ErrFailed), or this journal holds that call (res
		// nil, nothing sent; the error's State is the call's). Not
		// "refused", nor "not journaled": an error would leave a queue's
		// message unacked, delivered again and refused so for ever. A
		// person looks the order up under its id, at the provider and in
		// the journal that holds its first call (Lookup). Never pay it
		// again under a new key.
		t.review++
	case errors.Is(err, idem.ErrUnknownOutcome):
		// Tell the customer "accepted, confirming"; Run settles it.
		t.handedOff++
	case err == nil || errors.Is(err, idem.ErrFailed):
		// Paid (res.ResourceID), or refused (res.Reason).
		t.settled++
	default:
		// Nothing journaled, nothing sent: an id idem refuses as a key
		// (ErrInvalidRequest), a closed client, a journal that refused
		// the write.
		return err
	}
	return nil
}

// duplicates counts, from the fake server's counters, the orders made more
// than once for one key.
func duplicates(ctx context.Context, c *idem.Client, srv *idemtest.Server) (int, error) {
	ops, err := c.List(ctx, idem.Filter{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, op := range ops {
		n += max(0, srv.Effects(token, op.Key)-1)
	}
	return n, nil
}

// simulatePreviousProcess journals three orders and closes the journal
// without sending them, as a process killed right after Prepare would.
func simulatePreviousProcess(path, ordersURL string) error {
	c, err := idem.Open(path)
	if err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		if _, err := c.Prepare(context.Background(), idem.Request{
			Ref:  fmt.Sprintf("earlier-%d", i),
			URL:  ordersURL,
			Body: fmt.Appendf(nil, `{"order":"earlier-%d","amount":%d,"currency":"EUR"}`, i, 100*i),
		}); err != nil {
			c.Close()
			return err
		}
	}
	return c.Close()
}
