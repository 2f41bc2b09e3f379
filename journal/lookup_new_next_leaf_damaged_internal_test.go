package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestLookupNewReadsTheNextLeafAsBboltDoes: a miss past the last element
// of a leaf that is not the tree's last is not lookupNew's to take on its
// own. bbolt's cursor goes on to the next leaf (Cursor.next) and enters
// it, and a damaged page there is ErrCorrupt. Here, for every leaf of the
// key index but the last, the next leaf's header names another page
// (bbolt's check of the page it enters panics), and lookupNew answers the
// key right after the leaf's last key as lookup does: ErrCorrupt. The
// random damage of TestLookupNewAgreesWithLookup seldom falls there; it
// passed with absent taking a branch's second-to-last child for its last.
func TestLookupNewReadsTheNextLeafAsBboltDoes(t *testing.T) {
	image, ps, root, _ := keysImage(t)
	r := treeReader{mm: image, ps: ps}
	pg, err := r.page(root)
	require.NoError(t, err)
	require.Equal(t, uint16(branchPageFlag), binary.LittleEndian.Uint16(pg[8:10]), "a key index of branch and leaves")
	n, err := count(pg)
	require.NoError(t, err)
	require.Greater(t, n, 2)
	leaves := make([]uint64, n)
	for i := range leaves {
		e := pageHeaderSize + i*pageElementSize
		leaves[i] = binary.LittleEndian.Uint64(pg[e+8 : e+16])
	}
	dir := t.TempDir()
	refused := 0
	for i := range n - 1 {
		leaf, err := r.page(leaves[i])
		require.NoError(t, err)
		m, err := count(leaf)
		require.NoError(t, err)
		last, err := elementKey(leaf, m-1, false)
		require.NoError(t, err)
		probe := append(bytes.Clone(last), 0)

		// The next leaf's header names another page.
		at := leaves[i+1] * ps
		was := bytes.Clone(image[at : at+8])
		binary.LittleEndian.PutUint64(image[at:], leaves[i+1]+1)
		path := filepath.Join(dir, fmt.Sprintf("j%d.db", i))
		require.NoError(t, os.WriteFile(path, image, 0o600))
		copy(image[at:], was)

		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		require.NoError(t, err)
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			// Through getters, as the committer's kept transaction
			// reads: a nil one's Bucket.Get stops at the leaf's end.
			var old, fresh getter
			lerr := readDamaged(func() error { _, _, err := old.lookup(tx, probe); return err })
			nerr := readDamaged(func() error { _, _, err := fresh.lookupNew(tx, probe); return err })
			require.ErrorIs(t, lerr, ErrCorrupt, "leaf %d of %d: lookup", i, n)
			require.ErrorIs(t, nerr, ErrCorrupt, "leaf %d of %d: lookupNew", i, n)
			refused++
			return nil
		}))
		require.NoError(t, db.Close())
	}
	require.Equal(t, n-1, refused)
}
