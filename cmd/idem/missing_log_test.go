package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// A journal file copied without its log while the application ran (a
// backup of the file alone, restored on a new host) depends on segments
// that are not beside it: the application's Open refuses it. list reads
// what is left and warns, check says which segment is missing and what to
// do, compact refuses it too, and compact -accept-lost-log is the knowing
// way on, after which the journal checks out.
func TestCheckAndCompactOfAJournalWithoutItsLog(t *testing.T) {
	ctx := context.Background()
	live := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.Open(live)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("default", "k-logged", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	data, err := os.ReadFile(live)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	path := filepath.Join(t.TempDir(), "journal.db")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	// What is left can be read, with a warning that it may lack
	// acknowledged operations.
	_, stderr, code := runIdem(t, "list", "-journal", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "idem: warning: ")
	require.Contains(t, stderr, "journal.db.log.0000000000000001")

	_, stderr, code = runIdem(t, "check", "-journal", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "journal.db.log.0000000000000001")
	require.Contains(t, stderr, "idem compact -accept-lost-log")
	_, stderr, code = runIdem(t, "compact", "-journal", path)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "journal.db.log.0000000000000001")

	stdout, stderr, code := runIdem(t, "compact", "-accept-lost-log", "-journal", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "compacted")
	stdout, stderr, code = runIdem(t, "check", "-journal", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ok")
}
