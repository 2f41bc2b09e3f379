package main

import (
	"testing"

	"github.com/idemkit/idem/internal/cli/clitest"
)

// As cmd/idem's: the usage asked for (its -dsn and -schema among the
// global flags) into a stdout that failed exited 0 with nothing printed;
// it now exits 1 with the write error on stderr, quietly to a reader gone.
func TestDSNUsageStdoutWriteFailureExitsNonZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"resolve", "-h"}, {"-dsn", "postgres://", "list", "-h"}} {
		clitest.RequireUnprintedExits(t, run, args)
	}
}
