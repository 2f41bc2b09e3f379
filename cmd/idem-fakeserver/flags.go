package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// options are the parsed command line.
type options struct {
	addr        string
	allowRemote bool
	cfg         fakeserver.Config
	// behavior is the -behavior preset's name; the knob flags modify it.
	behavior string
	webhook  webhookOptions
}

// generalFlags lists the flags other than fault rates and behaviours, in
// usage order.
var generalFlags = []string{
	"addr", "allow-remote", "key-header", "scope-header", "retention", "max-keys", "max-body",
	"seed", "delay", "retry-after", "http-date",
}

// behaviorFlags lists the flags of the server's behaviour, in usage order.
var behaviorFlags = []string{"behavior", "store-errors", "no-body-compare", "conflict-status", "key-ignored"}

// rateFlag returns the name of the rate flag of kind: the kind itself, the
// word POST /_faults takes.
func rateFlag(kind fakeserver.FaultKind) string { return string(kind) }

// renamedFlag is the flag.Value of a rate flag's former name ("-503"): it
// refuses any value, naming the flag to use, so a script written for the
// former names fails at once and says how to fix it.
type renamedFlag struct{ now fakeserver.FaultKind }

func (r renamedFlag) String() string { return "" }

func (r renamedFlag) Set(string) error {
	return fmt.Errorf("renamed: use -%s", rateFlag(r.now))
}

// formerRateFlags lists the former names of rate flags that differ from
// the kind's former name ("-delay" is still the duration flag, and
// "-delay-response" is the current name).
var formerRateFlags = []string{"500-after-commit", "500-before-commit", "429", "503"}

// rate is a flag.Value for a probability.
type rate float64

func (r *rate) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }

func (r *rate) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0 && v <= 1) {
		return errors.New("want a probability between 0 and 1")
	}
	*r = rate(v)
	return nil
}

func newFlagSet(opts *options, rates map[fakeserver.FaultKind]*rate) *flag.FlagSet {
	fs := flag.NewFlagSet("idem-fakeserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports errors and prints the usage
	fs.Usage = func() {}
	cfg := &opts.cfg
	fs.StringVar(&opts.addr, "addr", "127.0.0.1:0", "listen `address`; port 0 picks a free port")
	fs.BoolVar(&opts.allowRemote, "allow-remote", false, "allow an -addr that is not a loopback address")
	fs.StringVar(&cfg.KeyHeader, "key-header", fakeserver.DefaultKeyHeader, "idempotency key `header`")
	fs.StringVar(&cfg.ScopeHeader, "scope-header", fakeserver.DefaultScopeHeader, "`header` whose value scopes keys (the caller)")
	fs.DurationVar(&cfg.Retention, "retention", 0, "key retention window; after it a key executes again (default: the behavior's, else 24h)")
	fs.IntVar(&cfg.MaxKeys, "max-keys", fakeserver.DefaultMaxKeys, "keys stored at most; when full, new keys get 503")
	fs.Int64Var(&cfg.MaxBody, "max-body", fakeserver.DefaultMaxBody, "largest request body in `bytes`; larger get 413")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the random faults: the same seed gives the same faults")
	fs.DurationVar(&cfg.Profile.Delay, "delay", 2*time.Second, "duration of the delay-response, query-lag, slow-processing, preempt, still-running and lost-answer-lag faults")
	fs.DurationVar(&cfg.Profile.RetryAfter, "retry-after", time.Second, "Retry-After of the throttle (429) and unavailable (503) faults and the 409 of slow processing")
	fs.BoolVar(&cfg.Profile.HTTPDate, "http-date", false, "send Retry-After as an HTTP-date instead of seconds")
	fs.StringVar(&opts.behavior, "behavior", fakeserver.IETFDraft().Name, "how the server answers a key it has seen: `name` of a preset (see below)")
	fs.BoolVar(&cfg.Behavior.StoreErrors, "store-errors", false, "store the handler's 500 and 503 as the key's answer and replay them")
	fs.BoolVar(&cfg.Behavior.NoBodyCompare, "no-body-compare", false, "replay a used key's answer to any request with it, whatever the body")
	fs.IntVar(&cfg.Behavior.ConflictStatus, "conflict-status", http.StatusUnprocessableEntity, "`status` for a used key with another request")
	fs.BoolVar(&cfg.Behavior.KeyIgnored, "key-ignored", false, "ignore the key: every submit executes, answers carry Idempotency-Status: ignored (Solidgate's endpoints without idempotency support)")
	opts.webhook.register(fs)
	for _, k := range fakeserver.FaultKinds() {
		r := new(rate)
		rates[k] = r
		fs.Var(r, rateFlag(k), k.Description())
	}
	for _, name := range formerRateFlags {
		now, _ := fakeserver.Renamed(name)
		fs.Var(renamedFlag{now}, name, "former name of -"+rateFlag(now))
	}
	return fs
}

// parseFlags parses the command line into options. It returns flag.ErrHelp
// for -h.
func parseFlags(args []string) (options, error) {
	var opts options
	rates := make(map[fakeserver.FaultKind]*rate)
	fs := newFlagSet(&opts, rates)
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := opts.resolveBehavior(set); err != nil {
		return options{}, err
	}
	if err := checkAddr(opts.addr, opts.allowRemote); err != nil {
		return options{}, err
	}
	if err := opts.webhook.resolve(&opts.cfg, set); err != nil {
		return options{}, err
	}
	switch {
	case set["retention"] && opts.cfg.Retention <= 0:
		return options{}, fmt.Errorf("-retention %v: want a positive duration", opts.cfg.Retention)
	case opts.cfg.MaxKeys <= 0:
		return options{}, fmt.Errorf("-max-keys %d: want a positive number", opts.cfg.MaxKeys)
	case opts.cfg.MaxBody <= 0:
		return options{}, fmt.Errorf("-max-body %d: want a positive number", opts.cfg.MaxBody)
	case opts.cfg.Profile.Delay < 0 || opts.cfg.Profile.RetryAfter < 0:
		return options{}, errors.New("-delay and -retry-after must not be negative")
	case opts.cfg.KeyHeader == "":
		return options{}, errors.New("-key-header must not be empty")
	}
	// Summed in a fixed order, and with the server's own allowance for
	// rounding (Profile.validate): floating-point addition is not
	// associative, and summing in map order refused rates that add up to
	// exactly 1 (0.1, 0.34, 0.56) in some runs and not in others.
	sum := 0.0
	for _, k := range fakeserver.FaultKinds() {
		if r := rates[k]; *r > 0 {
			if opts.cfg.Profile.Rates == nil {
				opts.cfg.Profile.Rates = make(map[fakeserver.FaultKind]float64)
			}
			opts.cfg.Profile.Rates[k] = float64(*r)
			sum += float64(*r)
		}
	}
	if sum > 1+1e-9 {
		return options{}, fmt.Errorf("fault rates sum to %g; want at most 1 (one fault per request)", sum)
	}
	return opts, nil
}

// resolveBehavior turns the -behavior preset and the knob flags the
// command line set into the server's behaviour.
func (opts *options) resolveBehavior(set map[string]bool) error {
	b, err := fakeserver.BehaviorNamed(opts.behavior)
	if err != nil {
		return fmt.Errorf("-behavior: %w", err)
	}
	knobs := opts.cfg.Behavior
	changed := false
	if set["store-errors"] && knobs.StoreErrors != b.StoreErrors {
		b.StoreErrors, changed = knobs.StoreErrors, true
	}
	if set["no-body-compare"] && knobs.NoBodyCompare != b.NoBodyCompare {
		b.NoBodyCompare, changed = knobs.NoBodyCompare, true
	}
	if set["key-ignored"] && knobs.KeyIgnored != b.KeyIgnored {
		b.KeyIgnored, changed = knobs.KeyIgnored, true
	}
	current := b.ConflictStatus
	if current == 0 {
		current = http.StatusUnprocessableEntity
	}
	if set["conflict-status"] && knobs.ConflictStatus != current {
		b.ConflictStatus, changed = knobs.ConflictStatus, true
	}
	if changed {
		// No longer the preset: named by its knobs.
		b.Name = ""
	}
	opts.cfg.Behavior = b
	return nil
}

// checkAddr refuses an address that is not loopback unless allowRemote.
func checkAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-addr %q is not a loopback address; add -allow-remote to listen on it", addr)
}

// printUsage writes the -h text.
func printUsage(w io.Writer) {
	var opts options
	rates := make(map[fakeserver.FaultKind]*rate)
	fs := newFlagSet(&opts, rates)
	fmt.Fprint(w, `Usage: idem-fakeserver [flags]

Runs the fake idempotent payment API of github.com/idemkit/idem until SIGINT
or SIGTERM. On start it prints one line to stdout:
  idem-fakeserver listening on http://127.0.0.1:PORT

HTTP:
  POST|PUT|PATCH|DELETE /any/path  submit; needs the key header (bare or "quoted")
  GET  /operations/{key}           state of an operation; 404 if unknown
  GET  /_stats                     counters as JSON
  GET  /_key?key=K&scope=S         counters of one key as JSON
  GET  /_behavior                  the server's behavior as JSON
  POST /_faults                    script a fault, e.g. {"kind":"unavailable","count":2,"key":"k",
                                   "query":false,"delay":"2s","retry_after":"1s","http_date":false}
  POST /_reset                     forget keys, counters, log and faults

Flags:
`)
	for _, name := range generalFlags {
		printFlag(w, fs.Lookup(name))
	}
	fmt.Fprint(w, `
Behavior: how the server answers a key it has seen. -behavior picks a preset;
-store-errors, -no-body-compare, -conflict-status and -key-ignored change it.
GET /_behavior shows the result under the same names.
`)
	for _, name := range behaviorFlags {
		printFlag(w, fs.Lookup(name))
	}
	for _, b := range fakeserver.Behaviors() {
		fmt.Fprintf(w, "    %-24s %s\n", b.Name, b.Description())
	}
	fmt.Fprint(w, `
Faults: each flag is the probability (0..1) that a submit gets that fault;
a request gets at most one, so the rates sum to at most 1. Each flag's
name is the fault's kind in POST /_faults.
`)
	for _, k := range fakeserver.FaultKinds() {
		printFlag(w, fs.Lookup(rateFlag(k)))
	}
	printWebhookUsage(w, fs)
}

func printFlag(w io.Writer, f *flag.Flag) {
	arg, usage := flag.UnquoteUsage(f)
	if _, ok := f.Value.(*rate); ok {
		arg = "rate"
	}
	line := "  -" + f.Name
	if arg != "" {
		line += " " + arg
	}
	if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" {
		usage += " (default " + def + ")"
	}
	fmt.Fprintf(w, "%-28s %s\n", line, strings.TrimSpace(usage))
}
