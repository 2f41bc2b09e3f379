package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// onFileSystem makes Open see every file on a file system of that kind,
// for the test.
func onFileSystem(t *testing.T, name string, kind fsKind) {
	saved := fileSystemOf
	fileSystemOf = func(*os.File) (string, fsKind) { return name, kind }
	t.Cleanup(func() { fileSystemOf = saved })
}

// A journal on NFS (a shared volume two replicas mount, say) is refused
// for writing, with what to do; a journal written before, elsewhere, is
// left as it was.
func TestNetworkFileSystemRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	s, err := Open(path)
	require.NoError(t, err)
	now := time.Now()
	_, err = s.Create(context.Background(), &Record{Scope: "s", Key: "k", Method: "POST", URL: "http://127.0.0.1/x",
		Body: []byte("{}"), BodySHA: sha256.Sum256([]byte("{}")), State: StatePending, Created: now, Updated: now})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	onFileSystem(t, "NFS", networkFS)
	_, err = Open(path)
	require.ErrorIs(t, err, ErrNetworkFileSystem)
	for _, says := range []string{path, "NFS", "local disk", "pgjournal", "AllowNetworkFileSystem"} {
		require.Contains(t, err.Error(), says)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a refused Open changes nothing")

	ro, err := Open(path, ReadOnly())
	require.NoError(t, err, "reading a journal never needs the lock to keep writers out")
	_, err = ro.Get(context.Background(), "s", "k")
	require.NoError(t, err)
	require.NoError(t, ro.Close())

	s, err = Open(path, AllowNetworkFileSystem())
	require.NoError(t, err)
	_, err = s.Get(context.Background(), "s", "k")
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// A refused Open of a journal that is not there yet leaves no file.
func TestNetworkFileSystemRefusedCreatesNothing(t *testing.T) {
	onFileSystem(t, "NFS", networkFS)
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "idem.journal"))
	require.ErrorIs(t, err, ErrNetworkFileSystem)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left)
}

// FUSE may be local or remote: Open goes on, and says so to the logger.
func TestFUSEFileSystemWarned(t *testing.T) {
	onFileSystem(t, "FUSE", fuseFS)
	var logged bytes.Buffer
	s, err := Open(filepath.Join(t.TempDir(), "idem.journal"), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Contains(t, logged.String(), "FUSE")
	require.Contains(t, logged.String(), "local disk")
}

// The test machine's own disk is not taken for a network one.
func TestLocalFileSystemNotRefused(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "fs")
	require.NoError(t, err)
	defer f.Close()
	name, kind := statFileSystem(f)
	require.Equal(t, localFS, kind, "the temp dir's file system %q", name)
}
