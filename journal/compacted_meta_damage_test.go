package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCompactedJournalSurvivesADamagedMetaPage: bbolt keeps two meta
// pages and, when the one of the newest commit is damaged (a sector read
// back wrong), opens the file as the other one describes it, taking the
// damage for a commit a crash tore. Compact's copy of a journal under
// 64 MiB is one commit, so the other meta page described the empty file
// bbolt made: Open found an empty file, made a new journal over the copy
// and went on, every operation of the journal gone without an error.
// Either meta page damaged, the copy must still hold every record.
func TestCompactedJournalSurvivesADamagedMetaPage(t *testing.T) {
	ctx := context.Background()
	page := int64(os.Getpagesize())
	for _, damaged := range []int64{0, 1} {
		path := filepath.Join(t.TempDir(), "j.db")
		s, err := Open(path)
		require.NoError(t, err)
		for _, k := range []string{"a", "b", "c"} {
			_, err = s.Create(ctx, newRecord(k))
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
		_, err = Compact(path)
		require.NoError(t, err)

		// One bit of the meta page's checksum, as a bad sector gives it.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		off := damaged*page + pageHeaderSize + metaSize - 1
		b := make([]byte, 1)
		_, err = f.ReadAt(b, off)
		require.NoError(t, err)
		b[0] ^= 0x01
		_, err = f.WriteAt(b, off)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		s, err = Open(path)
		require.NoError(t, err, "meta page %d damaged", damaged)
		for _, k := range []string{"a", "b", "c"} {
			_, err = s.Get(ctx, "s", k)
			require.NoError(t, err, "meta page %d damaged: record %q", damaged, k)
		}
		require.NoError(t, s.Close())
	}
}
