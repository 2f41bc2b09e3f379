//go:build unix

package journal_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestCompactKeepsOwner: the copy Compact swaps in was created by
// whoever ran it. An operator who runs `idem compact` as root (sudo) left
// a journal owned by root, mode 0600: the application, running as its own
// user, could no longer open its journal and did not start. The copy now
// takes the journal's owner, group and mode (0640 stays 0640).
func TestCompactKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the journal another owner")
	}
	path := settledJournal(t, 50)
	const uid, gid = 4242, 4343
	require.NoError(t, os.Chown(path, uid, gid))
	require.NoError(t, os.Chmod(path, 0o640))

	_, err := journal.Compact(path)
	require.NoError(t, err)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	require.Equal(t, uint32(uid), st.Uid, "owner after Compact")
	require.Equal(t, uint32(gid), st.Gid, "group after Compact")
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "mode after Compact")
	require.Empty(t, compactCopies(t, path), "copies left behind")
}
