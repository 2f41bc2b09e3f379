package journal_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// ackedThenKilled runs a child process that opens the journal at path,
// creates three records, each acknowledged, and is SIGKILLed before its
// applier copies them into the file (as an OOM kill or a redeploy a moment
// after the writes does): they are in the log alone. It returns their keys.
func ackedThenKilled(t *testing.T, path string) []string {
	t.Helper()
	c := startChild(t, "ack", path)
	keys := killAfterDone(t, c)
	require.Len(t, keys, 3, "acknowledged writes; stderr:\n%s", c.stderr.String())
	return keys
}

// killAfterDone reads the child's "ACK <write>" lines up to "DONE", then
// SIGKILLs it, and returns the writes it acknowledged. A child that says
// anything else, or not "DONE" within a minute (a write stuck), is killed
// and the test fails, rather than waiting for go test's own timeout.
func killAfterDone(t *testing.T, c *child) []string {
	t.Helper()
	var acked []string
	deadline := time.After(time.Minute)
	for done := false; !done; {
		select {
		case line, ok := <-c.lines:
			if !ok || line == "DONE" {
				done = true
				break
			}
			ack, ok := strings.CutPrefix(line, "ACK ")
			if !ok {
				_ = c.cmd.Process.Kill()
				_ = c.cmd.Wait()
				t.Fatalf("child: %q; stderr:\n%s", line, c.stderr.String())
			}
			acked = append(acked, ack)
		case <-deadline:
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
			t.Fatalf("child did not report DONE within a minute, after %q; stderr:\n%s", acked, c.stderr.String())
		}
	}
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	for range c.lines {
	}
	_ = c.cmd.Wait()
	return acked
}

// requireAcked opens the journal at path for writing and requires every
// key in it.
func requireAcked(t *testing.T, path string, keys []string, opts ...journal.Option) {
	t.Helper()
	s, err := journal.Open(path, opts...)
	require.NoError(t, err)
	for _, k := range keys {
		_, err := s.Get(context.Background(), "acct", k)
		require.NoError(t, err, "acknowledged write %s", k)
	}
	require.NoError(t, s.Close())
}

// copyAlone copies the journal file at path, and nothing beside it, into
// a new directory, and returns the copy's path.
func copyAlone(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	require.NoError(t, os.WriteFile(dst, data, 0o600))
	return dst
}

// A write is acknowledged once it is in the log, and reaches the journal
// file up to a second later. A process killed in between leaves it in the
// log alone; if the log then goes missing while the process is down (a
// cleanup job deleting "*.log*", the file copied alone to a new host
// during an incident, a backup restored without its segments), the next
// Open found no segment, went on from the file's last applied position,
// and the acknowledged writes were gone without a word: an order journaled,
// perhaps sent, that no Resume would ever settle, and a caller's retry
// under a new key. The file now records which log it depends on, and Open
// refuses it, naming the segment, until the segments are back or the loss
// is accepted knowingly.
func TestJournalWithoutItsLogIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a child process")
	}
	for _, how := range []string{"segments removed", "file copied alone"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "journal.db")
			keys := ackedThenKilled(t, path)
			segs, err := filepath.Glob(path + ".log.*")
			require.NoError(t, err)
			require.NotEmpty(t, segs, "the killed child's log")

			open := path
			if how == "segments removed" {
				for _, seg := range segs {
					require.NoError(t, os.Remove(seg))
				}
			} else {
				open = copyAlone(t, path)
			}
			before, err := os.ReadFile(open)
			require.NoError(t, err)

			_, err = journal.Open(open)
			require.ErrorIs(t, err, journal.ErrLogMissing, "Open of a journal whose acknowledged writes are in a log that is gone")
			require.NotErrorIs(t, err, journal.ErrCorrupt, "the file is whole: a caller moving damaged journals aside must not throw it away")
			require.Contains(t, err.Error(), "journal.db.log.0000000000000001", "the error names the missing segment")
			require.Contains(t, err.Error(), "AcceptLostLog", "the error says how to go on knowingly")
			after, err := os.ReadFile(open)
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "the refused journal was changed")
			started, err := filepath.Glob(open + ".log.*")
			require.NoError(t, err)
			require.Empty(t, started, "the refusal started a segment")

			// Read-only, the operator sees what is left, with a warning,
			// and the check reports it.
			var logged bytes.Buffer
			s, err := journal.Open(open, journal.ReadOnly(), journal.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			require.Contains(t, logged.String(), "journal.db.log.0000000000000001", "the read-only Open warns")
			rep, err := journal.Inspect(open)
			require.ErrorIs(t, err, journal.ErrLogMissing, "Check of a journal whose log is missing")
			require.Len(t, rep.Problems, 1)
			require.Contains(t, rep.Problems[0], "journal.db.log.0000000000000001")

			// Knowingly: the writes that were in the log alone are lost,
			// and the journal goes on from there, for good.
			s, err = journal.Open(open, journal.AcceptLostLog())
			require.NoError(t, err)
			for _, k := range keys {
				_, err := s.Get(ctx, "acct", k)
				require.ErrorIs(t, err, journal.ErrNotFound, "%s: what the refusal kept from being lost without a word", k)
			}
			_, err = s.Create(ctx, journaltest.NewRecord("acct", "after", t0))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			requireAcked(t, open, []string{"after"})

			if how == "file copied alone" {
				// The original, with its log beside it, lost nothing.
				requireAcked(t, path, keys)
			}
		})
	}
}

// The refusal is for a journal that lost its log, never for a whole one:
// a killed process's file with its log, one closed cleanly, and a
// compacted one open as before, wherever the file is copied in the last
// two cases (they depend on no log).
func TestWholeJournalWithoutLogOpens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a child process")
	}
	t.Run("killed, log in place", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		keys := ackedThenKilled(t, path)
		requireAcked(t, path, keys, journal.ReadOnly())
		requireAcked(t, path, keys)
		// Applied and closed: the file no longer needs its log.
		requireAcked(t, copyAlone(t, path), keys)
	})
	t.Run("compacted", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		keys := ackedThenKilled(t, path)
		_, err := journal.Compact(path)
		require.NoError(t, err)
		segs, err := filepath.Glob(path + ".log.*")
		require.NoError(t, err)
		require.Empty(t, segs, "Compact's Close deletes the log")
		requireAcked(t, copyAlone(t, path), keys, journal.ReadOnly())
		require.NoError(t, journal.Check(path))
		requireAcked(t, path, keys)
	})
	t.Run("closed without a write", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.db")
		for range 2 {
			s, err := journal.Open(path)
			require.NoError(t, err)
			require.NoError(t, s.Close())
		}
		requireAcked(t, copyAlone(t, path), nil)
	})
}
