// Command faultmatrix runs the fault matrix of package crashtest: a fixed
// workload through the real client under each fake-server fault alone and a
// mixed profile, then one Resume with the faults off, and prints a Markdown
// table of the outcomes for each server behaviour (ietf-draft,
// stored-errors, no-body-compare, conflict-417, short-window,
// client-order-id: the client then sends its key in the body, as
// crashtest.BehaviorOptions says; key-ignored, an endpoint that executes
// every submit, last).
//
//	go run ./internal/crashtest/cmd/faultmatrix [-ops 100] [-seed 1] [-behavior name]
//	go run ./internal/crashtest/cmd/faultmatrix -webhooks [-ops 100] [-seed 1]
//
// With -webhooks it runs only the webhook row (crashtest.WebhookScenario):
// events settle what neither a resend nor a query may.
//
// It exits 1 if any operation was performed twice (under key-ignored: twice
// with no review flag on it, a silent duplicate), lost, marked failed
// although the server performed it or succeeded without a side effect of
// its own, or resent more than crashtest.MaxSubmitsAfterFinal times once
// the server's answer was final, and prints what broke to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/crashtest"
)

func main() {
	ops := flag.Int("ops", 100, "operations per fault")
	seed := flag.Int64("seed", 1, "seed of the fake server's random faults (row n uses seed+n)")
	name := flag.String("behavior", "", "run only the server behavior with this `name` (default: every one)")
	webhooks := flag.Bool("webhooks", false, "run only the webhook row: no result endpoint, responses lost past the key window, events settle")
	flag.Parse()
	if *ops <= 0 {
		fmt.Fprintln(os.Stderr, "faultmatrix: -ops must be positive")
		os.Exit(2)
	}
	if *webhooks {
		os.Exit(runWebhooks(*ops, *seed))
	}
	// key-ignored is not one of idemtest.Behaviors (its server makes a
	// second order of every resend, which idem can flag, not always
	// prevent), but the matrix accounts for it: a flagged second order
	// passes, a silent one fails.
	behaviors := append(idemtest.Behaviors(), idemtest.KeyIgnored())
	if *name == idemtest.KeyIgnored().Name {
		behaviors = []idemtest.Behavior{idemtest.KeyIgnored()}
	} else if *name != "" {
		b, err := idemtest.BehaviorNamed(*name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "faultmatrix: -behavior: %v, or %s\n", err, idemtest.KeyIgnored().Name)
			os.Exit(2)
		}
		behaviors = []idemtest.Behavior{b}
	}
	os.Exit(run(behaviors, *ops, *seed))
}

func run(behaviors []idemtest.Behavior, ops int, seed int64) int {
	dir, err := os.MkdirTemp("", "faultmatrix")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	broken := 0
	for i, b := range behaviors {
		if i > 0 {
			fmt.Println()
		}
		var rows []crashtest.Row
		for n, sc := range crashtest.Scenarios(b) {
			row, err := crashtest.RunScenario(context.Background(), sc, ops, seed+int64(n), dir)
			if err != nil {
				fmt.Fprintf(os.Stderr, "faultmatrix: %s: %s: %v\n", b, sc.Name, err)
				return 1
			}
			for _, p := range row.Problems {
				fmt.Fprintf(os.Stderr, "faultmatrix: %s: %s\n", b, p)
			}
			broken += len(row.Problems)
			rows = append(rows, row)
		}
		fmt.Printf("### %s: %s\n\n", b, b.Description())
		fmt.Print(crashtest.Markdown(rows))
	}
	fmt.Printf("\n%d operations per fault, seed %d, %s/%s, %d CPUs, %s, in %.1fs\n",
		ops, seed, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), time.Since(start).Seconds())
	if broken > 0 {
		return 1
	}
	return 0
}

func runWebhooks(ops int, seed int64) int {
	dir, err := os.MkdirTemp("", "faultmatrix")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	sc := crashtest.DefaultWebhookScenario
	row, err := crashtest.RunWebhookScenario(context.Background(), sc, ops, seed, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix: webhooks:", err)
		return 1
	}
	for _, p := range row.Problems {
		fmt.Fprintln(os.Stderr, "faultmatrix: webhooks:", p)
	}
	fmt.Printf("### webhooks: no result endpoint; drop-after-commit %g, decline %g; restart after twice the key window; events lost %g, duplicated %g, delayed up to %v\n\n",
		sc.Drop, sc.Decline, sc.Lose, sc.Duplicate, sc.Delay)
	fmt.Print(crashtest.WebhookMarkdown(row))
	fmt.Printf("\n%d operations, seed %d, %s/%s, %d CPUs, %s, in %.1fs\n",
		ops, seed, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), row.Elapsed.Seconds())
	if len(row.Problems) > 0 {
		return 1
	}
	return 0
}
