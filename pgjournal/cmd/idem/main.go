package main

import (
	"io"
	"os"

	"github.com/idemkit/idem/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the idem command with the -dsn mode added to cmd/idem's.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run(args, stdout, stderr, newDSNMode().mode())
}
