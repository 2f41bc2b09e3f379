package journal

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Promise 12: durability is fsync'd by default; only WithUnsafeNoSync turns
// it off. (A crash of the machine, which would show the difference, cannot
// be staged in a test: the flag bbolt commits with is checked instead.)
func TestPromiseFsyncByDefault(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "default.journal"))
	require.NoError(t, err)
	defer s.Close()
	require.False(t, s.db.NoSync, "a journal opened with default options commits without fsync")

	u, err := Open(filepath.Join(dir, "unsafe.journal"), WithUnsafeNoSync())
	require.NoError(t, err)
	defer u.Close()
	require.True(t, u.db.NoSync, "WithUnsafeNoSync has no effect")
}
