package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// The demo's identity on the fake server. The server scopes keys by the
// Authorization header, which idem adds at send time and never journals; the
// journal scope is idem's own name for the same account.
const (
	authorization = "Bearer sk_test_demo"
	journalScope  = "acct_demo"
)

// config is one run of the demo.
type config struct {
	Orders     int
	Workers    int
	Seed       int64
	Journal    string  // "" means a temporary file, removed afterwards
	CrashAfter float64 // below 1: a fraction of Orders; else a count; 0: no crash

	Rates      map[idemtest.FaultKind]float64
	FaultDelay time.Duration // slow processing, query lag, delayed responses
	RetryAfter time.Duration // of 429 and 503

	RetryTokens    float64       // each host's retry budget; 0 turns it off
	MaxElapsed     time.Duration // foreground budget per call
	AttemptTimeout time.Duration
	SettleTimeout  time.Duration // bound on Resume, and on waiting for Run

	Quiet   bool // no progress line
	Verbose bool // slog at debug level to stderr
}

// crashPoint returns after how many answered orders the demo crashes, or 0.
func (c config) crashPoint() int {
	switch {
	case c.CrashAfter <= 0:
		return 0
	case c.CrashAfter < 1:
		return max(1, int(c.CrashAfter*float64(c.Orders)))
	default:
		return min(int(c.CrashAfter), c.Orders)
	}
}

func (c config) validate() error {
	if c.Orders < 1 || c.Workers < 1 {
		return fmt.Errorf("need at least one order and one worker (-n %d, -c %d)", c.Orders, c.Workers)
	}
	var sum float64
	for k, r := range c.Rates {
		if r < 0 || r > 1 {
			return fmt.Errorf("rate of %q is %v; want 0..1", k, r)
		}
		sum += r
	}
	if sum > 1 {
		return fmt.Errorf("fault rates add up to %.2f; the server picks at most one fault per request, so they must add up to 1 or less", sum)
	}
	return nil
}

// order is one business intent and what the demo learnt about it. The key is
// chosen before the first send, as an application would store an order
// draft's id, so the order can be submitted again after a crash.
type order struct {
	ref  string
	key  string
	body []byte

	acked   bool   // Submit returned a Result: the journal holds it
	outcome string // how the last call ended: "settled", "handed off", "abandoned" (the crash), "error"
	err     error  // the last call's error when outcome is "error"
}

// summary is what the demo prints, and what its test checks.
type summary struct {
	JournalPath string
	Orders      int
	CrashedAt   int // orders answered when the crash came; 0 if none

	// From the journal, at the end.
	Operations, Succeeded, Failed, Open, Review int

	// How the foreground calls ended.
	SettledAtOnce, HandedOff, Abandoned int

	Resume idem.Summary // what Resume found after the crash
	// OpenAtRestart breaks down the operations Resume found open: those
	// the crash abandoned mid-call, and those handed off (unknown or
	// processing) before the crash, which the dead process's reconciler
	// never settled. The second is why "resumed" can exceed "abandoned".
	OpenAtRestart       openAtRestart
	SettledInBackground int // settlements reported by WithSettleFunc

	// From the client's hooks.
	Attempts, Queries int

	// From the fake server.
	Server           idemtest.Stats
	Duplicates       int // sum over keys of max(0, side effects - 1)
	MaxEffectsPerKey int

	Lost         int      // acknowledged, then missing from the journal or open without a review reason
	Disagree     int      // the journal and the server disagree (succeeded with no order, failed with one)
	NotSubmitted int      // orders the demo never got acknowledged
	Errors       []string // the first few unexpected Submit errors
	OpenSamples  []string // the first few operations still open without a review reason

	Elapsed time.Duration
}

// openAtRestart counts the operations open in the journal when the second
// process starts, by how the first process's call for them ended.
type openAtRestart struct {
	Abandoned int // the crash cut the call short
	HandedOff int // the call returned ErrUnknownOutcome before the crash
	Other     int // the call settled or failed with another error, yet the operation is open
}

// countOpen counts the journal's open operations by how the dead process's
// call for them ended.
func countOpen(ctx context.Context, c *idem.Client, orders []*order) (openAtRestart, error) {
	var n openAtRestart
	open, err := c.List(ctx, idem.Filter{States: openStates})
	if err != nil {
		return n, fmt.Errorf("list the open operations after the crash: %w", err)
	}
	byKey := make(map[string]*order, len(orders))
	for _, o := range orders {
		byKey[o.key] = o
	}
	for _, op := range open {
		o := byKey[op.Key]
		switch {
		case o != nil && o.outcome == "abandoned":
			n.Abandoned++
		case o != nil && o.outcome == "handed off":
			n.HandedOff++
		default:
			n.Other++
		}
	}
	return n, nil
}

// OK reports whether every order exists exactly once and nothing was lost.
func (s summary) OK() bool {
	return s.Duplicates == 0 && s.MaxEffectsPerKey <= 1 && s.Lost == 0 && s.Disagree == 0 && s.NotSubmitted == 0
}

// counters are shared by the workers, the hooks and the progress line.
type counters struct {
	done, inFlight                       atomic.Int64 // foreground calls answered, running
	settledOK, settledFailed             atomic.Int64 // settlements, whoever settled them
	attempts, queries, settledBackground atomic.Int64
}

// run runs the demo: start the server, submit orders, crash, resume, settle,
// count. Progress goes to stderr, the summary to stdout.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (summary, error) {
	if err := cfg.validate(); err != nil {
		return summary{}, err
	}
	start := time.Now()

	srv, err := idemtest.NewServer(
		idemtest.WithSeed(cfg.Seed),
		idemtest.WithProfile(idemtest.Profile{Rates: cfg.Rates, Delay: cfg.FaultDelay, RetryAfter: cfg.RetryAfter}),
	)
	if err != nil {
		return summary{}, err
	}
	defer srv.Close()

	path := cfg.Journal
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return summary{}, fmt.Errorf("journal %s exists: remove it or give another -journal path (the demo counts the orders of one run)", path)
		}
	} else {
		dir, err := os.MkdirTemp("", "idem-orders-")
		if err != nil {
			return summary{}, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "orders.journal")
	}

	orders := makeOrders(cfg.Orders, cfg.Seed)
	var cnt counters
	opts := clientOptions(cfg, srv, &cnt, stderr)
	prog := newProgress(stderr, !cfg.Quiet, &cnt, len(orders))
	defer prog.stop()

	sum := summary{JournalPath: path, Orders: len(orders)}
	if !cfg.Quiet {
		fmt.Fprintf(stderr, "idem demo: %d orders, %d workers, seed %d, fake server %s\njournal: %s\n",
			len(orders), cfg.Workers, cfg.Seed, srv.URL, path)
	}

	// The first process: it submits orders until it crashes.
	first, err := idem.Open(path, opts...)
	if err != nil {
		return sum, err
	}
	crashAt := cfg.crashPoint()
	prog.phase("submitting")
	crashed, err := submitAll(ctx, first, srv.URL, orders, cfg.Workers, crashAt, &cnt)
	if err != nil {
		first.Close()
		return sum, err
	}
	if crashed {
		for _, o := range orders {
			if o.outcome == "abandoned" {
				sum.Abandoned++
			}
		}
		sum.CrashedAt = int(cnt.done.Load())
		prog.note(fmt.Sprintf("crash after %d orders: workers abandoned mid-request, journal closed", sum.CrashedAt))
	} else if err := first.Close(); err != nil {
		return sum, err
	}

	// The second process: same journal, fresh client.
	second, err := idem.Open(path, append(opts, idem.WithSettleFunc(func(*idem.Result) {
		cnt.settledBackground.Add(1)
	}))...)
	if err != nil {
		return sum, fmt.Errorf("reopen after the crash: %w", err)
	}
	defer second.Close()

	prog.phase("resume")
	if crashed {
		if sum.OpenAtRestart, err = countOpen(ctx, second, orders); err != nil {
			return sum, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.SettleTimeout)
	sum.Resume, err = second.Resume(rctx)
	cancel()
	if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return sum, fmt.Errorf("resume: %w", err)
	}
	// Past the bound, Run takes over what Resume did not reach.

	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- second.Run(runCtx) }()
	stopReconciler := func() error {
		stopRun()
		if err := <-runDone; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("reconciler: %w", err)
		}
		return nil
	}

	prog.phase("restarted")
	if _, err := submitAll(ctx, second, srv.URL, orders, cfg.Workers, 0, &cnt); err != nil {
		stopReconciler()
		return sum, err
	}
	prog.phase("reconciling")
	werr := waitSettled(ctx, second, cfg.SettleTimeout)
	if err := stopReconciler(); err != nil {
		return sum, err
	}
	if werr != nil && ctx.Err() != nil {
		return sum, werr
	}
	prog.stop()

	if err := count(ctx, &sum, second, srv, orders, &cnt); err != nil {
		return sum, err
	}
	sum.Elapsed = time.Since(start)
	printSummary(stdout, cfg, sum)
	return sum, nil
}

// clientOptions configures both clients alike: short budgets so that the
// demo runs in seconds, and the hooks that count attempts.
func clientOptions(cfg config, srv *idemtest.Server, cnt *counters, stderr io.Writer) []idem.Option {
	opts := []idem.Option{
		idem.WithHTTPClient(srv.Client()),
		idem.WithScope(journalScope),
		idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", authorization) // never journaled
			return nil
		}),
		idem.WithMaxElapsed(cfg.MaxElapsed),
		idem.WithAttemptTimeout(cfg.AttemptTimeout),
		idem.WithRetryAfterCap(2 * time.Second),
		idem.WithBackoff(func() backoff.BackOff {
			return backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(50*time.Millisecond),
				backoff.WithMaxInterval(500*time.Millisecond),
				backoff.WithMaxElapsedTime(0), // idem's budgets end the call
			)
		}),
		idem.WithReconcile(200*time.Millisecond, time.Second, time.Hour),
		idem.WithRetryBudget(cfg.RetryTokens, idem.DefaultRetryTokenRatio),
		idem.WithHooks(idem.Hooks{
			Attempt: func(_ context.Context, ev idem.AttemptEvent) {
				cnt.attempts.Add(1)
				if ev.Query {
					cnt.queries.Add(1)
				}
			},
			Settle: func(_ context.Context, res *idem.Result) {
				if res.State == idem.StateSucceeded {
					cnt.settledOK.Add(1)
				} else {
					cnt.settledFailed.Add(1)
				}
			},
		}),
	}
	if cfg.Verbose {
		opts = append(opts, idem.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	return opts
}

// makeOrders builds n orders, each with its own key and body.
func makeOrders(n int, seed int64) []*order {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x1de))
	orders := make([]*order, n)
	for i := range orders {
		ref := fmt.Sprintf("order-%04d", i+1)
		orders[i] = &order{
			ref: ref,
			key: idem.NewKey(),
			body: fmt.Appendf(nil, `{"reference":%q,"customer":"cus_%03d","amount":%d,"currency":"EUR"}`,
				ref, rng.IntN(500), 100+rng.IntN(99_900)),
		}
	}
	return orders
}
