package main

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
	"github.com/idemkit/idem/journal"
)

// list, show and stats printed into a stdout that failed (a full disk)
// and exited 0: a script or a runbook took the lost answer for an empty
// one. They now exit 1 with the write error on stderr, with -journal and
// -url alike. To a reader that went away they exit 1 saying nothing: its
// going is the pipeline's doing, not the operator's problem.
func TestReadStdoutWriteFailureExitsNonZero(t *testing.T) {
	file := newJournal(t)
	served := newJournal(t)
	reads := [][]string{
		{"list"}, {"list", "-json"},
		{"show", "k-unknown"}, {"show", "-json", "k-unknown"},
		{"stats"}, {"stats", "-json"},
	}
	for _, mode := range [][]string{{"-journal", file.path}, {"-url", serveJournal(t, served.path)}} {
		for _, args := range reads {
			clitest.RequireUnprintedExits(t, run, append(append([]string{}, mode...), args...))
		}
	}
}

// resolve's confirmation unprinted (stdout on a full disk, or a reader
// gone) exited 0 with nothing said: the operator could not tell whether
// the resolution was written. It is, and the command now says so on
// stderr with exit status 1, with -journal and -url alike.
func TestResolveStdoutWriteFailureSaysTheResolutionIsJournaled(t *testing.T) {
	file := newJournal(t)
	served := newJournal(t)
	url := serveJournal(t, served.path)
	for _, tc := range []struct {
		mode   []string
		force  bool
		stdout interface{ Write([]byte) (int, error) }
		errno  syscall.Errno
	}{
		{[]string{"-journal", file.path}, false, clitest.FullDisk{}, syscall.ENOSPC},
		{[]string{"-url", url}, false, clitest.FullDisk{}, syscall.ENOSPC},
		// A reader gone is told too: the resolution is not the pipeline's.
		{[]string{"-journal", file.path}, true, clitest.ReaderGone{}, syscall.EPIPE},
		{[]string{"-url", url}, true, clitest.ReaderGone{}, syscall.EPIPE},
	} {
		args := append(append([]string{}, tc.mode...), "resolve", "k-unknown", "-succeeded", "-reason", "seen in the dashboard", "-by", "alice")
		if tc.force {
			args = append(args, "-force") // settled by the case before
		}
		var stderr bytes.Buffer
		code := run(args, tc.stdout, &stderr)
		require.Equal(t, 1, code, "%q: %s", args, stderr.String())
		require.Regexp(t, `^idem: resolved operation k-unknown in scope default: (unknown|succeeded) -> succeeded; the resolution is journaled, but printing it failed: `+
			tc.errno.Error()+"\n$", stderr.String(), "%q", args)
	}
	rec, err := record(t, file.path, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, rec.State)
	require.Equal(t, "alice", rec.Resolved.By)
	out, stderr, code := runIdem(t, "-url", url, "show", "k-unknown")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resolved by hand: by alice at ")
}
