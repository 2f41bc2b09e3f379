package journal

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// bolt.Open commits, before it returns, when the file's last commit
// skipped the freelist (NoFreelistSync, which tuneFreelist turns on for
// a journal with many free pages): it writes the freelist and a new meta
// page naming the tree as memory shows it, and fsyncs them. After a
// failed write that tree is the one the disk may not hold (its pages
// marked clean, served from memory), and that commit ran before
// rewriteAfterFailure: it made durable a meta page over pages that a
// reboot takes back to older contents, a B+tree pointing at the wrong
// pages, while Open, the disk still failing, said "nothing was changed".
// Open now keeps bbolt from committing until the journal is written
// again and synced, and writes the freelist itself after that.
func TestReopenAfterFailedWriteCommitsNothingFirst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	freelistSkipped(t, path)
	// Then a write failed.
	require.NoError(t, markWriteFailed(filepath.Dir(path), filepath.Base(path), syscall.EIO))

	before, err := os.ReadFile(path)
	require.NoError(t, err)
	m, ok := newestMetaOf(before)
	require.True(t, ok)
	require.Equal(t, noFreelist, m.freelist, "the fixture's freelist, unsynced")

	_, err = Open(path, withFailSync(func(p string) error {
		if p == path {
			return syscall.EIO
		}
		return nil
	}))
	require.ErrorIs(t, err, syscall.EIO, "Open over a failed write, the disk still failing")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the refused journal's bytes: a commit before it was written again")

	// The disk takes them: written again, then the freelist, as bbolt
	// would have written it.
	requireWrittenAgain(t, path, segmentsOf(t, path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	m, ok = newestMetaOf(data)
	require.True(t, ok)
	require.NotEqual(t, noFreelist, m.freelist, "the freelist, once the journal is on disk")
	s, err := Open(path, ReadOnly())
	require.NoError(t, err)
	_, err = s.Get(ctx, "s", "k0")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, Check(path))
}

// freelistSkipped makes a journal at path holding the record k0 whose
// last commit skipped the freelist, as a journal with more than
// freelistUnsyncAbove free pages commits.
func freelistSkipped(t *testing.T, path string) {
	t.Helper()
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), rvRecord("k0", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(*bolt.Tx) error { return nil }))
	require.NoError(t, db.Close())
}
