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
// device", show and stats exited 0), and so does key-ignoring remove (it
// said only "printing the output failed").
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

	// key-ignoring remove's removal, and the flag it set first, are
	// journaled all the same: it says so, as resolve does.
	require.NoError(t, pg.store.AddKeyIgnoring(context.Background(), ordersEndpoint))
	stderr.Reset()
	code = run(pg.args("key-ignoring", "remove", ordersEndpoint), clitest.FullDisk{}, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Equal(t, "idem: removed "+ordersEndpoint+` (flagged 1 open operation(s) to it "key ignored"); the removal is journaled, but printing it failed: `+
		syscall.ENOSPC.Error()+"\n", stderr.String())
	es, err := pg.store.KeyIgnoringEndpoints(context.Background())
	require.NoError(t, err)
	require.Empty(t, es)
}
