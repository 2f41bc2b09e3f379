package journal_test

// Compact replaces the journal file: it must replace the right file, keep
// its owner and mode, and never be turned into a way to write elsewhere.

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestCompactThroughSymlink: Compact renamed its copy over the
// path it was given. When that path is a symbolic link to the journal,
// the link was replaced by a regular file and the journal it pointed to
// was left as it was: from then on the application (opening the real
// path) and the operator tool (opening the link) work on two different
// journals, and what one resolves or prunes the other never sees.
func TestCompactThroughSymlink(t *testing.T) {
	real := settledJournal(t, 200)
	link := filepath.Join(t.TempDir(), "journal-link")
	require.NoError(t, os.Symlink(real, link))

	_, err := journal.Compact(link)
	require.NoError(t, err)

	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.True(t, fi.Mode()&os.ModeSymlink != 0, "Compact replaced the symlink with a regular file (mode %v)", fi.Mode())
	require.NoError(t, journal.Check(real))
	_, err = os.Stat(real + ".compact")
	require.ErrorIs(t, err, os.ErrNotExist)

	// One journal: a write through the link is seen at the real path.
	ctx := context.Background()
	s, err := journal.Open(link)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "after-compact", time.Now()))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = journal.Open(real, journal.ReadOnly())
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "acct", "after-compact")
	require.NoError(t, err)
}

// TestCompactKeepsOwner: the copy Compact swaps in was created by
// whoever ran it. An operator who runs `idem compact` as root (sudo) left
// a journal owned by root, mode 0600: the application, running as its own
// user, could no longer open its journal and did not start. The copy now
// takes the journal's owner and group.
func TestCompactKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the journal another owner")
	}
	path := settledJournal(t, 50)
	const uid, gid = 4242, 4343
	require.NoError(t, os.Chown(path, uid, gid))

	_, err := journal.Compact(path)
	require.NoError(t, err)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	require.Equal(t, uint32(uid), st.Uid, "owner after Compact")
	require.Equal(t, uint32(gid), st.Gid, "group after Compact")
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
