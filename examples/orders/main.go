// Command orders is idem's main demo: a few hundred orders sent through a
// flaky payment API, a crash half-way, a restart that resumes, and proof from
// the server's own counters that every order was created exactly once.
//
//	go run ./examples/orders
//
// It needs no setup. It starts idem's fake idempotent server in-process on
// 127.0.0.1 (package idemtest) with seeded, realistic faults: responses
// dropped after the order was created, 503 with Retry-After, a result
// endpoint that lags behind, slow processing, a few 500s after commit,
// garbage bodies and card declines. It journals to a temporary directory
// (or -journal PATH, kept afterwards for the idem command).
//
// What it teaches:
//
//   - A timeout is not a failure. A dropped response leaves an order in an
//     unknown state; idem asks the result endpoint (or resends with the same
//     key) instead of guessing, and hands what it cannot settle in time to
//     the background reconciler (Client.Run) rather than failing it.
//   - The journal survives the process. Part-way through, the demo cancels
//     its workers in mid-request and closes the journal as a dying process
//     would, without settling anything by hand. A fresh Client on the same
//     file runs Client.Resume and Client.Run and settles every order the
//     dead process left open, with the keys it had journaled.
//   - The result can be checked. The summary counts duplicates from the fake
//     server's side-effect counters and lost orders from the journal; the
//     command exits 1 if either is not zero.
//
// Flags choose the number of orders (-n), workers (-c), the seed, the fault
// rates (-drop-after-commit, -unavailable, -query-lag, -slow-processing, …:
// each flag is the fault's kind, as in package idemtest and
// cmd/idem-fakeserver) and when to crash (-crash-after: a fraction of -n,
// or a count).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

func main() {
	// Named for the program, not for the binary go run builds in its
	// cache (flag's default usage printed "Usage of /tmp/go-build…/exe/orders").
	flag.CommandLine.Init("orders", flag.ContinueOnError)
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum, err := run(ctx, cfg, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
	if !sum.OK() {
		fmt.Fprintln(os.Stderr, "orders: FAILED: duplicate, lost or unsettled orders (see the summary)")
		os.Exit(1)
	}
}

// faultFlag is a fault the demo injects, with its default rate. The flag's
// name is the kind: one name per fault, as in idemtest, POST /_faults and
// cmd/idem-fakeserver.
type faultFlag struct {
	kind idemtest.FaultKind
	rate float64 // default probability per submit
}

// faultFlags are the faults the demo injects by default, with their rates.
// The fake server picks at most one fault per submit.
var faultFlags = []faultFlag{
	{idemtest.DropAfterCommit, 0.06},
	{idemtest.Unavailable, 0.05},
	{idemtest.QueryLag, 0.05},
	{idemtest.SlowProcessing, 0.05},
	{idemtest.ErrorAfterCommit, 0.02},
	{idemtest.GarbageBody, 0.02},
	{idemtest.Throttle, 0.02},
	{idemtest.ErrorBeforeCommit, 0.01},
	{idemtest.TruncatedBody, 0.01},
	{idemtest.DelayResponse, 0.01},
	{idemtest.Decline, 0.02},
	// Off unless asked: flags for every kind a demo run can use.
	{idemtest.StillRunning, 0},
	{idemtest.LostAnswerLag, 0},
	{idemtest.StillRunningDecline, 0},
	{idemtest.StillRunningProcessing, 0},
}

// renamedFlags maps the fault flags' former names to the kinds they were
// renamed to. They are refused with the new name rather than accepted: one
// name per fault.
var renamedFlags = map[string]idemtest.FaultKind{
	"drop":      idemtest.DropAfterCommit,
	"lag":       idemtest.QueryLag,
	"slow":      idemtest.SlowProcessing,
	"garbage":   idemtest.GarbageBody,
	"truncated": idemtest.TruncatedBody,
	"delay":     idemtest.DelayResponse,
}

// renamedFlag refuses any value, naming the flag to use instead.
type renamedFlag struct{ now idemtest.FaultKind }

func (r renamedFlag) String() string { return "" }

func (r renamedFlag) Set(string) error { return fmt.Errorf("renamed: use -%s", r.now) }

// usageHeader starts the -h text.
const usageHeader = `usage: go run ./examples/orders [flags]

Sends orders through a flaky fake payment API, crashes half-way, resumes
from the journal and proves from the server's counters that every order
exists exactly once. Exits 1 on a duplicate, lost or unsettled order.

Flags:
`

// printUsage writes the -h text: the program as one runs it, and every
// flag but the former names.
func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, usageHeader)
	shown := flag.NewFlagSet("orders", flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if _, old := renamedFlags[f.Name]; !old {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.PrintDefaults()
}

// parseFlags reads the command line into a config.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	cfg := defaultConfig()
	fs.IntVar(&cfg.Orders, "n", cfg.Orders, "number of orders")
	fs.IntVar(&cfg.Workers, "c", cfg.Workers, "concurrent workers")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the server's random faults")
	fs.StringVar(&cfg.Journal, "journal", cfg.Journal, "journal `path` (kept afterwards); default a temporary file, removed")
	fs.Float64Var(&cfg.CrashAfter, "crash-after", cfg.CrashAfter, "crash after this many orders answered: a fraction of -n (0.5) or a count (150); 0 for no crash")
	fs.DurationVar(&cfg.FaultDelay, "fault-delay", cfg.FaultDelay, "how long slow processing, result lag, delayed responses and still-running requests last")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", cfg.RetryAfter, "Retry-After of 429 and 503 answers (whole seconds)")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", cfg.SettleTimeout, "how long the reconciler may take to settle what is open after the restart")
	fs.Float64Var(&cfg.RetryTokens, "retry-budget", cfg.RetryTokens, "tokens in each host's retry budget (retries stop at half); 0 turns it off")
	fs.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress line")
	fs.BoolVar(&cfg.Verbose, "v", cfg.Verbose, "log every attempt (slog, to stderr)")
	rates := make(map[idemtest.FaultKind]*float64, len(faultFlags))
	for _, f := range faultFlags {
		rates[f.kind] = fs.Float64(string(f.kind), f.rate, "rate (0..1): "+faultDescription(f.kind))
	}
	for old, now := range renamedFlags {
		fs.Var(renamedFlag{now}, old, "former name of -"+string(now))
	}
	// Parse prints a bad flag's error and calls Usage; the full text, for
	// -h only, would bury that one line.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs)
		} else {
			fmt.Fprintln(fs.Output(), "run go run ./examples/orders -h for the flags")
		}
		return config{}, err
	}
	for k, r := range rates {
		cfg.Rates[k] = *r
	}
	return cfg, nil
}

// faultDescription describes a fault kind for the flag help.
func faultDescription(k idemtest.FaultKind) string {
	d := k.Description()
	if d == "" {
		return string(k)
	}
	return d
}

// isTerminal reports whether w is a terminal, for the progress line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// defaultConfig is the demo as `go run ./examples/orders` runs it.
func defaultConfig() config {
	rates := make(map[idemtest.FaultKind]float64, len(faultFlags))
	for _, f := range faultFlags {
		rates[f.kind] = f.rate
	}
	return config{
		Orders:         300,
		Workers:        16,
		Seed:           1,
		CrashAfter:     0.5,
		Rates:          rates,
		FaultDelay:     1500 * time.Millisecond,
		RetryAfter:     time.Second,
		RetryTokens:    idem.DefaultRetryTokens,
		MaxElapsed:     3 * time.Second,
		AttemptTimeout: time.Second,
		SettleTimeout:  30 * time.Second,
	}
}
