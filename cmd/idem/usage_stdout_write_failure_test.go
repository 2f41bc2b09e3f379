package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
)

// The usage asked for (idem -h > /dev/full, help, a command's -h) into a
// stdout that failed exited 0 with nothing printed: a script or a person
// took the lost text for idem having none to give. It now exits 1 with
// the write error on stderr, as every other output does, and quietly to
// a reader gone. A bad flag prints no usage (a line on stderr naming
// -h) and keeps exit status 2.
func TestUsageStdoutWriteFailureExitsNonZero(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"-help"}, {"--help"}, {"help"}, {"help", "show"},
		{"show", "-h"}, {"resolve", "-help"}, {"key-ignoring", "-h"}, {"-journal", "x", "list", "-h"},
	} {
		clitest.RequireUnprintedExits(t, run, args)

		out, errOut, code := runIdem(t, args...)
		require.Equal(t, 0, code, "%q: %s", args, errOut)
		require.Contains(t, out, "Usage: idem ", "%q", args)
	}
	for _, args := range [][]string{{"-bogus"}, {"show", "-bogus", "k"}} {
		var stderr bytes.Buffer
		code := run(args, clitest.FullDisk{}, &stderr)
		require.Equal(t, 2, code, "%q: %s", args, stderr.String())
		require.Contains(t, stderr.String(), "flag provided but not defined: -bogus", "%q", args)
	}
}
