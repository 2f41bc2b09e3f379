// Command service shows the start-up and shutdown pattern of a service that
// embeds idem.
//
//	cd examples/service && go run .      # runs 5 s, then stops by itself
//	go run . -duration 0                 # runs until Ctrl-C or SIGTERM
//	curl 127.0.0.1:8081/metrics          # while it runs: Prometheus metrics
//	curl 127.0.0.1:8081/idem/stats       # and the admin handler
//
// It is a module of its own (it pulls OpenTelemetry and Prometheus, which
// idem's root module does not depend on).
//
// The pattern, in order:
//
//  1. idem.Open the service's own journal file. One process owns it; each
//     replica of a service has its own.
//  2. Client.Resume before taking new work: it settles what the previous
//     process left open (here, three orders a simulated earlier process
//     journaled and never sent), and its Summary is logged. Start-up waits
//     for it at most -startup (30 s); a longer Resume (a large backlog, a
//     slow provider) goes on while the service serves, and Run settles
//     what it leaves: a service that exits instead never serves. Its
//     error, if it then fails (the journal cannot be read or written),
//     is logged when it returns, not left for shutdown.
//  3. go Client.Run: the background reconciler settles what foreground calls
//     handed off with ErrUnknownOutcome, and tells the service through the
//     WithSettleFunc callback, the place to update the order's own record.
//     That callback is told once, after the commit: before Resume, the
//     service records the outcome of each order still "confirming" that
//     the journal holds settled (settleConfirming; a kill between the
//     commit and the callback left it so), and sweeps so every minute.
//  4. Serve: each incoming order is submitted with a short foreground budget,
//     under the order's own id as the key, never one made up per call: an
//     order delivered again (its caller's retry after a kill) is then the
//     same operation, not a second payment. An unknown outcome is not an
//     error page; it is "accepted, confirming". One flagged for review
//     (ErrNeedsReview, or Result.Review with no error) goes to a person.
//  5. Operate: /metrics (the OpenTelemetry layer, idemotel, exported to
//     Prometheus) and the admin handler under /idem/, on loopback.
//  6. On SIGINT or SIGTERM: stop taking work, let calls in flight finish
//     within a drain timeout, stop the reconciler, log what is still open
//     (the next start resumes it), and close the journal.
//
// The payment API is idem's fake server (package idemtest), in-process on
// 127.0.0.1, with some 503s with Retry-After, slow processing and dropped
// responses. Logs go to stderr through log/slog.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idem"
)

func main() {
	cfg := defaultConfig()
	flag.StringVar(&cfg.Journal, "journal", "", "journal `path`, kept between runs; default a temporary file, removed")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "stop by itself after this long; 0 runs until SIGINT or SIGTERM")
	flag.DurationVar(&cfg.Every, "every", cfg.Every, "one incoming order this often")
	flag.IntVar(&cfg.MaxOrders, "max-orders", cfg.MaxOrders, "stop taking orders after this many")
	flag.DurationVar(&cfg.Startup, "startup", cfg.Startup, "how long start-up waits for Resume before serving beside it")
	flag.StringVar(&cfg.OpsAddr, "ops", cfg.OpsAddr, "`address` of /metrics and of the admin handler (/idem/)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the process at once
	}()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	rep, err := run(ctx, cfg, log)
	if err != nil {
		log.Error("service failed", "err", err)
		os.Exit(1)
	}
	fmt.Printf("orders taken %d: settled in the call %d, handed off %d, for review %d; settled in the background %d; open at exit %d; server-side duplicates %d\n",
		rep.Taken, rep.SettledInCall, rep.HandedOff, rep.Review, rep.SettledInBackground, rep.OpenAtExit, rep.Duplicates)
	if rep.Duplicates != 0 {
		os.Exit(1)
	}
}

// config is one run of the service.
type config struct {
	Journal   string        // "" means a temporary file, removed at exit
	Duration  time.Duration // 0: until a signal
	Every     time.Duration // one order this often
	MaxOrders int           // bound on the orders taken
	OpsAddr   string        // where /metrics and /idem/ listen
	// Inspect, when set, is called with the ops endpoints' base URL once
	// the orders are taken, before shutdown (the test scrapes there).
	Inspect func(opsURL string)

	MaxElapsed time.Duration // foreground budget per order
	Drain      time.Duration // how long calls in flight may finish at shutdown
	Startup    time.Duration // how long start-up waits for Resume before serving beside it

	// provider, when set, wraps the transport to the payment API (the
	// test makes it answer slowly).
	provider func(http.RoundTripper) http.RoundTripper
	// open, when set, opens the Client in place of idem.Open (the test
	// gives it a journal that fails).
	open func(path string, opts ...idem.Option) (*idem.Client, error)
	// orders, when set, is the service's own order records, kept across
	// runs as its database would be; nil means a new, empty one.
	orders *orderBook
}

func defaultConfig() config {
	return config{
		Duration:   5 * time.Second,
		Every:      100 * time.Millisecond,
		MaxOrders:  1000,
		MaxElapsed: 800 * time.Millisecond,
		Drain:      2 * time.Second,
		Startup:    30 * time.Second,
		OpsAddr:    "127.0.0.1:8081",
	}
}
