package journal

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestRoomCarvesKeysApart: the keys the applier gives bbolt to keep until
// its transaction ends (sequence and index keys), carved from shared
// chunks (getter.room), are each their own: of the length asked, no room
// to grow into the next one's bytes, none of them overlapping, and
// unchanged by every key carved after them; a nil getter allocates.
func TestRoomCarvesKeysApart(t *testing.T) {
	var g getter
	var keys [][]byte
	for i := range 500 {
		n := []int{seqKeySize, timeKeySize + seqKeySize, 1, 40}[i%4]
		k := g.room(n)
		require.Len(t, k, 0)
		require.Equal(t, n, cap(k), "key %d", i)
		k = k[:n]
		for j := range k {
			k[j] = byte(i)
		}
		keys = append(keys, k)
	}
	for i, k := range keys {
		require.Equal(t, bytes.Repeat([]byte{byte(i)}, len(k)), k, "key %d after all were carved", i)
	}
	require.Equal(t, 2*keyRoom, cap(g.room(2*keyRoom)), "a key larger than a chunk")
	require.Equal(t, seqKeySize, cap((*getter)(nil).room(seqKeySize)))

	// One transaction applying more records than a chunk holds keys for
	// writes the sequence and index keys it did: the indexes check.
	s, _ := rvOpen(t, WithUnsafeNoSync())
	ctx := context.Background()
	for i := range 300 {
		key := fmt.Sprintf("k%03d", i)
		_, err := s.Create(ctx, rvRecord(key, rvT0.Add(time.Duration(i)*time.Second)))
		require.NoError(t, err)
		if i%3 == 0 {
			_, err = s.Update(ctx, "s", key, func(r *Record) error {
				r.State, r.Settled, r.Updated = StateSucceeded, rvT0.Add(time.Hour), rvT0.Add(time.Hour)
				return nil
			})
			require.NoError(t, err)
		}
	}
	require.NoError(t, s.viewChecked())
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		require.Equal(t, 300, tx.Bucket(bucketKeys).Stats().KeyN)
		require.Equal(t, 200, tx.Bucket(bucketDue).Stats().KeyN)
		require.Equal(t, 100, tx.Bucket(bucketSettled).Stats().KeyN)
		return nil
	}))
}
