package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// bbolt keeps two meta pages and, when the one of the newest commit is
// damaged (a sector read back wrong), opens the file as the other one
// describes it, taking the damage for a commit a crash tore. Whatever
// only the newest commit holds must then be somewhere else too.

// TestCompactedJournalSurvivesADamagedMetaPage: Compact's copy of a
// journal under 64 MiB is one commit, so the other meta page described
// the empty file bbolt made: Open found an empty file, made a new journal
// over the copy and went on, every operation of the journal gone without
// an error. Either meta page damaged, the copy must still hold every
// record.
func TestCompactedJournalSurvivesADamagedMetaPage(t *testing.T) {
	for _, damaged := range []int64{0, 1} {
		path := closedJournalOf(t, "a", "b", "c")
		_, err := Compact(path)
		require.NoError(t, err)
		damageMetaPage(t, path, damaged)
		requireRecords(t, path, "meta page "+string(rune('0'+damaged))+" damaged", "a", "b", "c")
	}
}

// TestClosedJournalSurvivesADamagedNewestMetaPage: Close copies the log
// into the file in one commit and deletes the log, so the writes of the
// last round were in the newest commit alone: with its meta page damaged,
// Open went on with the commit before, and they were gone without an
// error (the three Creates of a service's last seconds, all of them).
func TestClosedJournalSurvivesADamagedNewestMetaPage(t *testing.T) {
	path := closedJournalOf(t, "a", "b", "c")
	damageMetaPage(t, path, newestMetaPage(t, path))
	requireRecords(t, path, "newest meta page damaged", "a", "b", "c")
}

// closedJournalOf returns the path of a closed journal holding records of keys.
func closedJournalOf(t *testing.T, keys ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path)
	require.NoError(t, err)
	for _, k := range keys {
		_, err = s.Create(context.Background(), newRecord(k))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	return path
}

// newestMetaPage returns which meta page (0 or 1) of the file at path
// has the higher transaction id.
func newestMetaPage(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	page := os.Getpagesize()
	m0, ok0 := parseMeta(b)
	m1, ok1 := parseMeta(b[page:])
	require.True(t, ok0 && ok1)
	if m1.txid > m0.txid {
		return 1
	}
	return 0
}

// damageMetaPage flips one bit of the checksum of meta page n of the file
// at path, as a bad sector gives it back.
func damageMetaPage(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	off := n*int64(os.Getpagesize()) + pageHeaderSize + metaSize - 1
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x01
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// requireRecords opens the journal at path and requires a record of each
// key.
func requireRecords(t *testing.T, path, what string, keys ...string) {
	t.Helper()
	s, err := Open(path)
	require.NoError(t, err, what)
	defer s.Close()
	for _, k := range keys {
		_, err = s.Get(context.Background(), "s", k)
		require.NoError(t, err, "%s: record %q", what, k)
	}
}
