package journal

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestPruneKeepsRecordFromNewerIdem: after a rollback, the journal holds
// settled records the newer idem wrote in a record version this build
// does not read. Prune failed on the first one with ErrVersion, which Run
// takes for a journal it cannot use, and stopped settling for good. It
// must keep such a record (bytes and index entry) for the newer idem,
// prune the others as the retention rule says, and log it once.
func TestPruneKeepsRecordFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	cut := rvT0.Add(10 * time.Hour)
	var recs []*Record
	for _, key := range []string{"a", "newer", "z"} {
		r := rvRecord(key, rvT0)
		r.State, r.Settled = StateSucceeded, rvT0
		recs = append(recs, r)
	}
	path := newJournalFile(t)
	putRecords(t, path, len(recs), func(i int) *Record { return recs[i] })

	newer := recs[1]
	var written []byte
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk := tx.Bucket(bucketKeys).Get(recordKey(newer.Scope, newer.Key))
		written = encode(nil, newer)
		written[2] = recordVersion + 1
		return tx.Bucket(bucketDone).Put(sk, written)
	}))
	require.NoError(t, db.Close())

	var logged bytes.Buffer
	s, err := Open(path, WithUnsafeNoSync(), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	n, err := s.Prune(ctx, cut)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the records this build reads are pruned")
	n, err = s.Prune(ctx, cut)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 1, strings.Count(logged.String(), "level=WARN"), "said once: %s", logged.String())
	require.Contains(t, logged.String(), "records=1")
	require.NoError(t, s.Close())

	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		sk := tx.Bucket(bucketKeys).Get(recordKey(newer.Scope, newer.Key))
		require.NotNil(t, sk, "its key index entry kept")
		require.Equal(t, written, tx.Bucket(bucketDone).Get(sk), "its bytes untouched")
		require.Equal(t, 1, tx.Bucket(bucketSettled).Stats().KeyN, "its settled index entry kept, for the newer idem's prune")
		return nil
	}))
}
