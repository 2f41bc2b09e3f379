package journal

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A read-only Open (idem list, show, check) of a journal whose last
// commit failed once written (fsync(2), "writeback errors": the pages it
// could not write are marked clean and served from memory) read that
// commit back as if it were on disk and said nothing: the operator saw
// the failed commit's records as settled, though a reboot may take them
// back to what they were, and the marker that says so sat beside the
// file unread. Read-only Open changes nothing, so it cannot write the
// journal again as an Open for writing does; it warns instead, and the
// check reports it, saying how to make the disk hold what it shows. Once
// an Open for writing has done that (the marker gone), neither speaks.
func TestReadOnlyOpenAfterFailedWriteSaysSo(t *testing.T) {
	ctx := context.Background()
	path := failedCommitJournal(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	var logged bytes.Buffer
	s, err := Open(path, ReadOnly(), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err, "read-only Open of a journal whose write failed: the operator still reads it")
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Contains(t, logged.String(), "level=WARN", "read-only Open of a journal whose write failed")
	require.Contains(t, logged.String(), "j.db.write-failed", "the warning names the marker")
	require.Contains(t, logged.String(), "open it for writing", "the warning says what to do")

	rep, err := Inspect(path)
	require.ErrorIs(t, err, ErrFileFailed, "Check of a journal whose write failed")
	require.Len(t, rep.Problems, 1)
	require.Contains(t, rep.Problems[0], "may not hold")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the read-only journal's bytes")
	_, err = os.Stat(path + writeFailedSuffix)
	require.NoError(t, err, "the marker, left to an Open for writing")

	// Written again and synced by an Open for writing: nothing to say.
	s, err = Open(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	logged.Reset()
	s, err = Open(path, ReadOnly(), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, logged.String())
	require.NoError(t, Check(path))
}
