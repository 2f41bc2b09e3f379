package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestJournalCutShortAsItWasMadeSaysSo: a journal file cut short while
// bbolt made it (its four first pages written in part: a file-size limit,
// a file system that cannot reserve them, a kill) never held anything, and
// Open says so and to remove it; every start refused it as truncated and
// asked for a complete copy to restore, which there is not. A journal cut
// short after its first commit is still refused as truncated.
func TestJournalCutShortAsItWasMadeSaysSo(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, pages := range []int64{1, 2, 3} {
		path := filepath.Join(t.TempDir(), "j.db")
		db, err := bolt.Open(path, 0o600, nil) // bbolt's own first pages
		require.NoError(t, err)
		require.NoError(t, db.Close())
		require.NoError(t, os.Truncate(path, pages*page))
		_, err = Open(path)
		require.ErrorIs(t, err, ErrCorrupt, "%d pages", pages)
		require.ErrorContains(t, err, "never held an operation (the disk filled, or the process was killed, as it was made); remove it and start again", "%d pages", pages)
		_, err = Open(path, ReadOnly())
		require.ErrorContains(t, err, "never held an operation", "read-only, %d pages", pages)
	}

	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	_, err = s.Create(context.Background(), newRecord("k"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.Truncate(path, 2*page))
	_, err = Open(path)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "restore the journal from a complete copy")
	require.NotContains(t, err.Error(), "never held")
}
