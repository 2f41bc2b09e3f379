package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// putRecords writes n records, rec(0) to rec(n-1), into the journal file
// at path (which nothing holds) as they are, indexed by their times as
// Prune finds them, in transactions of a bounded size.
func putRecords(tb testing.TB, path string, n int, rec func(i int) *Record) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	require.NoError(tb, err)
	for start := 0; start < n; start += 20000 {
		require.NoError(tb, db.Update(func(tx *bolt.Tx) error {
			for i := start; i < min(start+20000, n); i++ {
				r := rec(i)
				if err := addRecord(tx, recordKey(r.Scope, r.Key), r, encode(nil, r)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	require.NoError(tb, db.Close())
}

// newJournalFile creates an empty journal and returns its path.
func newJournalFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "j.db")
	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(tb, err)
	require.NoError(tb, s.Close())
	return path
}

// TestPruneDeletesWhatPrunableSays: Prune deletes exactly the records
// Record.Prunable selects, whatever times they carry, around the cut-off
// to the nanosecond.
func TestPruneDeletesWhatPrunableSays(t *testing.T) {
	ctx := context.Background()
	cut := rvT0.Add(10 * time.Hour)
	at := func(d time.Duration) time.Time { return cut.Add(d) }
	settled := func(key string, set func(r *Record)) *Record {
		r := rvRecord(key, rvT0)
		r.State, r.Created, r.Settled, r.Updated = StateSucceeded, at(-3*time.Hour), at(-2*time.Hour), at(-2*time.Hour)
		set(r)
		return r
	}
	recs := []*Record{
		settled("before", func(*Record) {}),
		settled("failed before", func(r *Record) { r.State = StateFailed }),
		settled("just before", func(r *Record) { r.Settled = at(-time.Nanosecond) }),
		settled("at the cut-off", func(r *Record) { r.Settled = at(0) }),
		settled("sent after", func(r *Record) {
			r.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: at(-3 * time.Hour)}, {Number: 2, Kind: AttemptQuery, Start: at(time.Nanosecond)}}
		}),
		settled("first sent at", func(r *Record) { r.FirstSent = at(0) }),
		settled("created after", func(r *Record) { r.Created = at(time.Hour) }),
		settled("updated after", func(r *Record) { r.Updated = at(time.Hour) }),
		settled("flagged for review", func(r *Record) { r.Review = ReviewConfirmConflict }),
	}
	path := newJournalFile(t)
	putRecords(t, path, len(recs), func(i int) *Record { return recs[i] })

	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()
	n, err := s.Prune(ctx, cut)
	require.NoError(t, err)
	var pruned []string
	for _, r := range recs {
		_, gerr := s.Get(ctx, r.Scope, r.Key)
		if r.Prunable(cut) {
			pruned = append(pruned, r.Key)
			require.ErrorIs(t, gerr, ErrNotFound, "record %q: Prunable, still there", r.Key)
		} else {
			require.NoError(t, gerr, "record %q: not Prunable, pruned", r.Key)
		}
	}
	require.Equal(t, len(pruned), n, "Prune() = %d; pruned %v", n, pruned)
	require.Len(t, pruned, 4, "the table has Prunable records and kept ones")
	require.NoError(t, s.viewChecked())
}

// TestPruneRefusesRecordItCannotRead: Prune judged a record by its state
// alone (decodeState) and read the rest only to apply the retention rule;
// a settled record whose state read but whose rest was damaged skipped
// that rule and was deleted, without a word, whatever its times said. It
// must fail with ErrCorrupt naming the record, and delete nothing.
func TestPruneRefusesRecordItCannotRead(t *testing.T) {
	ctx := context.Background()
	cut := rvT0.Add(10 * time.Hour)
	r := rvRecord("damaged", rvT0)
	r.State, r.Settled = StateSucceeded, rvT0
	// Sent after the cut-off: Prunable keeps it.
	r.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: cut.Add(time.Hour)}}
	ok := rvRecord("sound", rvT0)
	ok.State, ok.Settled = StateFailed, rvT0
	path := newJournalFile(t)
	putRecords(t, path, 2, func(i int) *Record { return []*Record{r, ok}[i] })

	// Cut the damaged record's encoding short after its state.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk := tx.Bucket(bucketKeys).Get(recordKey(r.Scope, r.Key))
		enc := encode(nil, r)
		return tx.Bucket(bucketDone).Put(sk, enc[:len(enc)-8])
	}))
	require.NoError(t, db.Close())

	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	n, err := s.Prune(ctx, cut)
	require.ErrorIs(t, err, ErrCorrupt, "Prune() = %d", n)
	require.Contains(t, err.Error(), fmt.Sprintf("record %q: record: ", recordKey(r.Scope, r.Key)))
	require.Zero(t, n)
	_ = s.Close()
	ro, err := Open(path, ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Get(ctx, ok.Scope, ok.Key)
	require.NoError(t, err, "the chunk that failed deleted nothing")
}

// TestPruneDropsStrayIndexEntry: an entry of the settled index whose
// record is open (left by damage) goes, and the record stays.
func TestPruneDropsStrayIndexEntry(t *testing.T) {
	ctx := context.Background()
	r := rvRecord("open", rvT0)
	path := newJournalFile(t)
	putRecords(t, path, 1, func(int) *Record { return r })
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk := tx.Bucket(bucketKeys).Get(recordKey(r.Scope, r.Key))
		// The open record moved to the done bucket, indexed as settled.
		v := tx.Bucket(bucketOpen).Get(sk)
		if err := tx.Bucket(bucketDone).Put(sk, v); err != nil {
			return err
		}
		return tx.Bucket(bucketSettled).Put(indexKey(rvT0, sk), recordKey(r.Scope, r.Key))
	}))
	require.NoError(t, db.Close())

	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()
	n, err := s.Prune(ctx, rvT0.Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "an open record is never pruned")
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketSettled).Cursor().First()
		require.Nil(t, k, "the stray entry is gone")
		require.NotNil(t, tx.Bucket(bucketDone).Get(tx.Bucket(bucketKeys).Get(recordKey(r.Scope, r.Key))), "the record stays")
		return nil
	}))
}
