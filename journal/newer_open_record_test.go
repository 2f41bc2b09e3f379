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
