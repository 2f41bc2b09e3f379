package main

import (
	"io"
	"os"

	"github.com/idemkit/idem/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command; the commands are package cli's, which the
// PostgreSQL journal's idem command (pgjournal/cmd/idem) shares.
func run(args []string, stdout, stderr io.Writer) int { return cli.Run(args, stdout, stderr) }
