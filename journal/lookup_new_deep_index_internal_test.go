package journal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestLookupNewFindsEveryKeyOfADeepIndex: a create's look into the file
// (lookupNew) finds every key the file holds, and answers what lookup
// answers for the keys between them, on a key index of three levels or
// more, through one getter kept across lookups as the committer's kept
// transaction reads. TestLookupNewAgreesWithLookup's index has a single
// branch page, so there a search past the end of the last leaf under a
// branch is past the end of the tree; here it is not, and a search that
// ended past the end of such a subtree, taken as past the end of the tree
// (treeReader.absent's last and edge must hold of every branch on the
// way), answered the next subtree's first key absent: a Create of an
// operation already journaled journaled it again. Keys come time-ordered
// (idem's UUIDv7) and in no order (a caller's UUIDv4 or order numbers),
// and the Store's Creates of keys it holds, each right after a create of
// a new key just below it, fail with ErrExists.
func TestLookupNewFindsEveryKeyOfADeepIndex(t *testing.T) {
	for _, order := range []string{"time-ordered", "random"} {
		t.Run(order, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 17))
			s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync())
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			const n = 20000
			keys := make([]string, n)
			for i := range keys {
				if order == "time-ordered" {
					keys[i] = fmt.Sprintf("%08x-%04x-7%03x-%016x", i, rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint64())
				} else {
					keys[i] = fmt.Sprintf("%08x-%04x-4%03x-%016x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint64())
				}
				_, err := s.Create(ctx, rvRecord(keys[i], rvT0))
				require.NoError(t, err)
			}
			require.NoError(t, s.Checkpoint(ctx))

			rks := make([][]byte, n)
			for i, k := range keys {
				rks[i] = recordKey("s", k)
			}
			// In key order, each key then the key right after it: the
			// search for that one ends past the end of its leaf, and
			// past the end of every subtree the key is the last of.
			slices.SortFunc(rks, bytes.Compare)
			var probes [][]byte
			for _, rk := range rks {
				probes = append(probes, rk, append(bytes.Clone(rk), 0))
			}
			// And in no order, with keys between them.
			for _, i := range rng.Perm(n) {
				probes = append(probes, rks[i], append(bytes.Clone(rks[i]), 0), rks[i][:len(rks[i])-1])
			}
			var found, misses int
			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				require.GreaterOrEqual(t, tx.Bucket(bucketKeys).Stats().Depth, 3, "levels of the key index")
				var g getter
				for _, rk := range probes {
					sk, v, err := lookup(tx, rk)
					require.NoError(t, err)
					newSK, newV, err := g.lookupNew(tx, rk)
					require.NoError(t, err, "key %q", rk)
					require.Equal(t, sk, newSK, "key %q", rk)
					require.Equal(t, v, newV, "key %q", rk)
					if newV != nil {
						found++
					} else {
						misses++
					}
				}
				return nil
			}))
			require.Equal(t, 2*n, found, "every key, found twice")
			require.Equal(t, 3*n, misses, "the keys between them")

			// The Store's Creates read the file in its kept transaction
			// (the overlay is empty after the checkpoint): in key order,
			// a new key right after each key (a caller's new key past
			// the end of a leaf or subtree), then a retry of the next
			// key, which the file holds.
			slices.Sort(keys)
			for i, k := range keys {
				_, err := s.Create(ctx, rvRecord(k+".", rvT0))
				require.NoError(t, err, "a new key")
				if i+1 < n {
					_, err = s.Create(ctx, rvRecord(keys[i+1], rvT0))
					require.ErrorIs(t, err, ErrExists, "key %s, journaled already", keys[i+1])
				}
			}
			require.NoError(t, s.Checkpoint(ctx))
			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				require.Equal(t, 2*n, tx.Bucket(bucketKeys).Stats().KeyN, "records journaled")
				return nil
			}))
		})
	}
}
