// Command faultmatrix runs the fault matrix of package crashtest: a fixed
// workload through the real client under each fake-server fault alone and a
// mixed profile, then one Resume with the faults off, and prints a Markdown
// table of the outcomes.
//
//	go run ./internal/crashtest/cmd/faultmatrix [-ops 100] [-seed 1]
//
// It exits 1 if any operation was performed twice, lost, or marked failed
// although the server performed it, and prints what broke to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/idemkit/idem/internal/crashtest"
)

func main() {
	ops := flag.Int("ops", 100, "operations per fault")
	seed := flag.Int64("seed", 1, "seed of the fake server's random faults (row n uses seed+n)")
	flag.Parse()
	if *ops <= 0 {
		fmt.Fprintln(os.Stderr, "faultmatrix: -ops must be positive")
		os.Exit(2)
	}
	os.Exit(run(*ops, *seed))
}

func run(ops int, seed int64) int {
	dir, err := os.MkdirTemp("", "faultmatrix")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultmatrix:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	var rows []crashtest.Row
	broken := 0
	for n, sc := range crashtest.Scenarios() {
		row, err := crashtest.RunScenario(context.Background(), sc, ops, seed+int64(n), dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "faultmatrix: %s: %v\n", sc.Name, err)
			return 1
		}
		for _, p := range row.Problems {
			fmt.Fprintln(os.Stderr, "faultmatrix:", p)
		}
		broken += len(row.Problems)
		rows = append(rows, row)
	}
	fmt.Print(crashtest.Markdown(rows))
	fmt.Printf("\n%d operations per fault, seed %d, %s/%s, %d CPUs, %s, in %.1fs\n",
		ops, seed, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), time.Since(start).Seconds())
	if broken > 0 {
		return 1
	}
	return 0
}
