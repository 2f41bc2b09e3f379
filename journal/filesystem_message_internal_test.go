package journal

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The refusal names the file once: "journal: open PATH: the file is on
// NFS, ...", not "journal: open PATH: open PATH: ...".
func TestNetworkFileSystemRefusalNamesTheFileOnce(t *testing.T) {
	onFileSystem(t, "NFS", networkFS)
	path := filepath.Join(t.TempDir(), "idem.journal")
	_, err := Open(path)
	require.ErrorIs(t, err, ErrNetworkFileSystem)
	require.Equal(t, 1, strings.Count(err.Error(), path), "Open() error = %q", err)
	require.True(t, strings.HasPrefix(err.Error(), "journal: open "+path+": the file is on NFS"), "Open() error = %q", err)
}
