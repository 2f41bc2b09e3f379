package journal

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestPathOfRepeatedKeyKeepsItsPath: the applier's getter answers a
// second check of the key it just checked without searching again; what
// it leaves on the cursor must still be that key's path, as a fresh
// cursor finds it, and a key checked after another one must be searched,
// not taken for the last.
func TestPathOfRepeatedKeyKeepsItsPath(t *testing.T) {
	s, rks := absentJournal(t, 3000, func(int) int { return 40 })
	rollback := errors.New("rollback")
	err := s.db.Update(func(tx *bolt.Tx) error {
		g := &getter{}
		keys := g.bucket(tx, bucketKeys)
		for _, k := range [][]byte{rks[10], rks[2500], rks[10], rks[10], rks[2999], rks[0], rks[2999]} {
			c, err := g.pathOf(tx, keys, k)
			require.NoError(t, err)
			fresh, err := newScanCursor(tx, keys, bucketKeys)
			require.NoError(t, err)
			require.NoError(t, fresh.path(k))
			require.Greater(t, len(fresh.stack), 1, "a tree of one page tests nothing")
			require.Equal(t, len(fresh.stack), len(c.stack), "path of %q", k)
			for i := range fresh.stack {
				f, got := fresh.stack[i], c.stack[i]
				require.Equal(t, f.i, got.i, "path of %q, level %d", k, i)
				require.Equal(t, f.n, got.n, "path of %q, level %d", k, i)
				require.Same(t, &f.pg[0], &got.pg[0], "path of %q, level %d: another page", k, i)
			}
		}
		return rollback
	})
	require.ErrorIs(t, err, rollback)
}
