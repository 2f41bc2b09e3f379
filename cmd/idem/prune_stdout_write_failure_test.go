package main

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
	"github.com/idemkit/idem/journal"
)

// prune's count is what a cron job or a runbook keeps of what it deleted.
// Written to a stdout that failed, it was lost and prune exited 0, as if
// the count had been printed. It now exits 1 and says on stderr what was
// done: the deletion stands (2 operations gone), the dry run's count too.
func TestPruneStdoutWriteFailureExitsNonZero(t *testing.T) {
	f := newJournal(t)
	var stderr bytes.Buffer
	code := run([]string{"prune", "-journal", f.path, "-settled-before", "720h", "-dry-run"}, clitest.FullDisk{}, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Contains(t, stderr.String(), "would delete 2 settled operations")
	require.Contains(t, stderr.String(), syscall.ENOSPC.Error())

	stderr.Reset()
	code = run([]string{"prune", "-journal", f.path, "-settled-before", "720h"}, clitest.FullDisk{}, &stderr)
	require.Equal(t, 1, code, stderr.String())
	require.Contains(t, stderr.String(), "deleted 2 settled operations")
	require.Contains(t, stderr.String(), syscall.ENOSPC.Error())
	for _, key := range []string{"k-succeeded", "k-binary"} {
		_, err := record(t, f.path, "default", key)
		require.ErrorIs(t, err, journal.ErrNotFound, "%s after prune", key)
	}
}
