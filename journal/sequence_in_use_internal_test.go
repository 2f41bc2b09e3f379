package journal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// addSettled adds settled records key-0 … key-(n-1) of scope s in tx
// through g, as the applier does, and returns the first error.
func addSettled(tx *bolt.Tx, g *getter, from, n int) error {
	for i := from; i < from+n; i++ {
		r := benchRecord(fmt.Sprintf("key-%d", i), benchBody, benchSHA)
		if err := settleRecord(r); err != nil {
			return err
		}
		if err := g.addRecord(tx, recordKey(r.Scope, r.Key), r, encode(nil, r)); err != nil {
			return err
		}
	}
	return nil
}

// TestApplySearchesSequenceNumbersOnce: the applier adds a batch of new
// records in one transaction, each with the next sequence number. Once
// one search found both record buckets ending before its number, the
// numbers after it are free without a search; each record's two searches
// were over a quarter of the applier's CPU per record. The records are
// stored as ever (check passes), on an empty file and on one that holds
// records already.
func TestApplySearchesSequenceNumbersOnce(t *testing.T) {
	s, _ := absentJournal(t, 0, nil)
	for round := range 2 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			g := &getter{}
			if err := addSettled(tx, g, round*50, 50); err != nil {
				return err
			}
			require.Equal(t, 1, g.seqSearches, "round %d: searches for 50 new records' sequence numbers", round)
			_, _, err := check(tx)
			return err
		})
		require.NoError(t, err)
	}
}

// TestSequenceNumberSetBackRefused: a counter set back (never done by the
// journal; damage, or a bad copy) gives numbers records hold. The first
// record of a batch whose number is taken is refused, and so is a later
// one when the first number fell in a hole (a record deleted by hand):
// the search that found a key after the first number keeps every later
// record of the transaction searched for.
func TestSequenceNumberSetBackRefused(t *testing.T) {
	s, _ := absentJournal(t, 0, nil)
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error { return addSettled(tx, &getter{}, 0, 5) }))
	rollback := errors.New("rollback")
	err := s.db.Update(func(tx *bolt.Tx) error {
		require.NoError(t, tx.Bucket(bucketKeys).SetSequence(2))
		err := addSettled(tx, &getter{}, 100, 1)
		require.ErrorIs(t, err, ErrCorrupt, "number 3, taken")
		require.ErrorContains(t, err, "sequence number 3 already in use")
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	err = s.db.Update(func(tx *bolt.Tx) error {
		require.NoError(t, tx.Bucket(bucketDone).Delete(seqKeyIn(make([]byte, 8), 2)))
		require.NoError(t, tx.Bucket(bucketKeys).SetSequence(1))
		g := &getter{}
		require.NoError(t, addSettled(tx, g, 100, 1), "number 2, a hole")
		err := addSettled(tx, g, 101, 1)
		require.ErrorIs(t, err, ErrCorrupt, "number 3, taken")
		require.ErrorContains(t, err, "sequence number 3 already in use")
		return rollback
	})
	require.ErrorIs(t, err, rollback)
}
