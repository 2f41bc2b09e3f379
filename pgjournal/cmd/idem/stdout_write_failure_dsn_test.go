package main

import (
	"bytes"
	"context"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
	"github.com/idemkit/idem/journal"
)

// With -dsn as with a journal file: list, show and stats exit 1 with the
// write error on stderr when stdout fails (a full disk), and quietly to a
// reader gone; resolve, whose resolution is written all the same, says so
// on stderr with exit status 1 (it exited 1 saying only "no space left on
// device", show and stats exited 0).
func TestDSNStdoutWriteFailureExitsNonZero(t *testing.T) {
	pg, _ := seeded(t)
	for _, args := range [][]string{{"list"}, {"list", "-json"}, {"show", "k-unknown"}, {"stats"}} {
		clitest.RequireUnprintedExits(t, run, pg.args(args...))
	}

	var stderr bytes.Buffer
	code := run(pg.args("resolve", "k-unknown", "-succeeded", "-reason", "seen in the dashboard", "-by", "alice"), clitest.FullDisk{}, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Equal(t, "idem: resolved operation k-unknown in scope default: unknown -> succeeded; the resolution is journaled, but printing it failed: "+
		syscall.ENOSPC.Error()+"\n", stderr.String())
	rec, err := pg.store.Get(context.Background(), "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, rec.State)
	require.Equal(t, "alice", rec.Resolved.By)
}
