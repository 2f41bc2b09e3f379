package journal_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestScansSkipOpenRecordFromNewerIdem: the scans of open records skip
// one a newer idem wrote, and leave it untouched (see
// journaltest.NewerOpenRecord).
func TestScansSkipOpenRecordFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	for _, r := range journaltest.NewerRecords() {
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	// The newer idem's record: its version byte above this build's.
	var written []byte
	recordOf := func(tx *bolt.Tx) []byte {
		sk := tx.Bucket([]byte("keys")).Get([]byte("s\x00" + journaltest.NewerKey))
		return tx.Bucket([]byte("open.seq")).Get(sk)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		written = bytes.Clone(recordOf(tx))
		written[2] = journal.RecordVersion + 1
		sk := tx.Bucket([]byte("keys")).Get([]byte("s\x00" + journaltest.NewerKey))
		return tx.Bucket([]byte("open.seq")).Put(sk, written)
	}))
	require.NoError(t, db.Close())

	var logged bytes.Buffer
	s, err = journal.Open(path, journal.WithUnsafeNoSync(), journal.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	journaltest.NewerOpenRecord(t, s, logged.String)
	require.NoError(t, s.Close())

	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		require.Equal(t, written, recordOf(tx), "its bytes untouched")
		return nil
	}))
}

// TestListSkipsRecordsFromNewerIdem: List leaves out the records a newer
// idem wrote, settled and open (see journaltest.NewerListed), from the
// file and from a read-only Store's merge with the log alike; a damaged
// record still fails it with ErrCorrupt.
func TestListSkipsRecordsFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	journaltest.CreateNewerListRecords(t, s)
	require.NoError(t, s.Close())
	journaltest.MakeNewer(t, path, "s", journaltest.NewerListKeys...)

	s, err = journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	journaltest.NewerListed(t, s)
	require.NoError(t, s.Close())

	ro, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	journaltest.NewerListed(t, ro)
	require.NoError(t, ro.Close())

	// The operator tool's read-only Store beside a service whose writes
	// are still in the log: it merges them, around the skipped records
	// of the file, a page of which holds nothing else.
	w, err := journal.OpenUnapplied(path)
	require.NoError(t, err)
	_, err = w.Update(ctx, "s", "l5", func(r *journal.Record) error { r.Review = "look"; return nil })
	require.NoError(t, err)
	_, err = w.Create(ctx, journaltest.NewRecord("s", "l6", time.Time{}))
	require.NoError(t, err)
	w.Crash(t)
	ro, err = journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	list := func(f journal.Filter) []string {
		recs, err := ro.List(ctx, f)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.Key)
		}
		return out
	}
	require.Equal(t, []string{"l0", "l4", "l5"}, list(journal.Filter{Review: true}))
	require.Equal(t, []string{"l4", "l5"}, list(journal.Filter{Review: true, After: journal.Position{Scope: "s", Key: "l1"}, Limit: 2}))
	require.Equal(t, []string{"l4"}, list(journal.Filter{After: journal.Position{Scope: "s", Key: "l1"}, Limit: 1}))
	require.Equal(t, []string{"l4", "l5", "l6"}, list(journal.Filter{Open: true}))
	st, err := ro.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Newer)
	require.Equal(t, 1, st.NewerOpen)
	require.NoError(t, ro.Close())

	// Damage, unlike a newer version, still fails the listing.
	journaltest.SetRecordByte(t, path, "s", "l1", 0, 0)
	s, err = journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()
	_, err = s.List(ctx, journal.Filter{})
	require.ErrorIs(t, err, journal.ErrCorrupt)
}
