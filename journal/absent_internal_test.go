package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// absentJournal writes n records whose keys have lengths keyLen returns,
// into the file itself, and returns the Store and their record keys.
func absentJournal(t testing.TB, n int, keyLen func(i int) int) (*Store, [][]byte) {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	var rks [][]byte
	for i := range n {
		key := fmt.Sprintf("%06d-", i)
		key += strings.Repeat("x", max(0, keyLen(i)-len(key)))
		_, err := s.Create(ctx, rvRecord(key, rvT0))
		require.NoError(t, err)
		rks = append(rks, recordKey("s", key))
	}
	require.NoError(t, s.Checkpoint(ctx))
	return s, rks
}

// TestVetMissAgreesWithBbolt: on a sound file, vetMiss confirms every miss
// bbolt's search reports (a false alarm would fail every Create of a new
// key) and finds every key bbolt finds, with its value, whatever the
// tree's shape: a key index held inline, one spanning several levels of
// branch pages, one whose keys need overflow pages.
func TestVetMissAgreesWithBbolt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []struct {
		name   string
		n      int
		keyLen func(i int) int
		inline bool
		depth  int // levels of pages at least
	}{
		{"inline", 12, func(int) int { return 8 }, true, 1},
		{"levels", 20000, func(int) int { return 7 + rng.IntN(200) }, false, 3},
		{"overflow", 300, func(i int) int { return 7 + (i%5)*3000 }, false, 2},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			s, rks := absentJournal(t, sh.n, sh.keyLen)
			// Keys next to every key: a byte less, a byte more, a prefix;
			// and keys before and after them all.
			var absent [][]byte
			for _, rk := range rks {
				absent = append(absent,
					append(bytes.Clone(rk), 0),
					rk[:len(rk)-1],
					append(bytes.Clone(rk[:len(rk)-1]), rk[len(rk)-1]+1),
					append(bytes.Clone(rk[:len(rk)-1]), rk[len(rk)-1]-1),
				)
			}
			absent = append(absent, []byte{0}, []byte("r\xff"), []byte("s"), []byte("s\x00"), []byte("t"), bytes.Repeat([]byte{0xff}, 300))

			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				keys := tx.Bucket(bucketKeys)
				require.Equal(t, sh.inline, keys.Root() == 0, "the key index is inline")
				st := keys.Stats()
				require.GreaterOrEqual(t, st.Depth, sh.depth, "levels of the key index")
				require.Equal(t, sh.name == "overflow", st.LeafOverflowN > 0, "overflow pages in the key index")
				var tree treeReader
				for _, rk := range rks {
					require.NotNil(t, keys.Get(rk))
					require.ErrorIs(t, vetMiss(tx, &tree, keys, bucketKeys, rk), ErrCorrupt, "vetMiss(%.40q) of a key the file holds", rk)
					if !sh.inline {
						found, v, err := tree.seek(uint64(keys.Root()), rk)
						require.NoError(t, err)
						require.True(t, found, "seek(%.40q)", rk)
						require.Equal(t, keys.Get(rk), v, "seek(%.40q)", rk)
					}
				}
				for _, rk := range absent {
					if keys.Get(rk) != nil {
						continue // a neighbour that is another key
					}
					require.NoError(t, vetMiss(tx, &tree, keys, bucketKeys, rk), "vetMiss(%.40q) of a key the file lacks", rk)
				}
				return nil
			}))
		})
	}
}

// keysImage writes a journal of 3000 records (absentJournal) and returns
// its file up to its high-water mark, its page size, the root page of its
// key index, and the record keys.
func keysImage(tb testing.TB) (image []byte, ps, root uint64, rks [][]byte) {
	tb.Helper()
	s, rks := absentJournal(tb, 3000, func(i int) int { return 7 + i%40 })
	require.NoError(tb, s.Close())
	image, ps, root = fileImage(tb, s.path)
	return image, ps, root, rks
}

// fileImage returns the closed journal file at path up to its high-water
// mark, its page size, and the root page of its key index.
func fileImage(tb testing.TB, path string) (image []byte, ps, root uint64) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(tb, err)
	var hwm uint64
	require.NoError(tb, db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket(bucketKeys).Root())
		hwm, ps = uint64(tx.Size()), uint64(tx.DB().Info().PageSize)
		return nil
	}))
	require.NoError(tb, db.Close())
	require.NotZero(tb, root)
	image, err = os.ReadFile(path)
	require.NoError(tb, err)
	return image[:hwm], ps, root
}

// damageImage writes patch into image at at or, when patch's first byte is
// odd, on the root page or the pages after it, and returns what restores
// image: restoring rather than copying spares megabytes per input.
func damageImage(image []byte, root, ps uint64, at uint32, patch []byte) (restore func()) {
	hwm := uint64(len(image))
	off := min(uint64(at), hwm)
	if len(patch) > 0 && patch[0]&1 == 1 {
		off = min(root*ps+uint64(at)%(8*ps), hwm)
	}
	was := bytes.Clone(image[off:min(off+uint64(len(patch)), hwm)])
	copy(image[off:], patch)
	return func() { copy(image[off:], was) }
}

// FuzzTreeSeek: the search of vetMiss reads pages that may be damaged in
// any way; whatever the bytes, it must return: no panic (it runs where a
// panic would be taken for bbolt's, and its slicing is all its own
// checks), no endless descent.
func FuzzTreeSeek(f *testing.F) {
	image, ps, root, rks := keysImage(f)

	f.Add(uint32(root*ps+16+4), []byte{0xff, 0xff, 0xff, 0x7f}, rks[1])
	f.Add(uint32(root*ps), []byte{1, 2, 3}, rks[2000])
	f.Add(uint32(root*ps+10), []byte{0xff, 0xff}, []byte("s\x00zzz"))
	f.Add(uint32(root*ps+16+8), []byte{byte(root)}, rks[5])
	f.Fuzz(func(t *testing.T, at uint32, patch, key []byte) {
		defer damageImage(image, root, ps, at, patch)()
		r := treeReader{mm: image, ps: ps}
		_, _, _ = r.seek(root, key)
	})
}

// TestTreeSeekBounded: a branch page whose child is itself (a damaged
// page id) sends the search round a loop; it must stop and say so. So must
// the scans' cursor, whose checks of the keys such a page passes.
func TestTreeSeekBounded(t *testing.T) {
	const ps = 4096
	mm := make([]byte, 4*ps)
	pg := mm[2*ps:]
	binary.LittleEndian.PutUint64(pg[0:8], 2)
	binary.LittleEndian.PutUint16(pg[8:10], branchPageFlag)
	binary.LittleEndian.PutUint16(pg[10:12], 1)
	binary.LittleEndian.PutUint32(pg[16:20], 16) // key right after the element
	binary.LittleEndian.PutUint32(pg[20:24], 1)
	binary.LittleEndian.PutUint64(pg[24:32], 2) // the child: this page
	pg[32] = 'a'
	r := treeReader{mm: mm, ps: ps}
	_, _, err := r.seek(2, []byte("b"))
	require.ErrorContains(t, err, "levels of branch pages")

	c := &scanCursor{r: r, name: bucketKeys, root: 2}
	_, _, err = c.first()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "levels of branch pages")
	_, _, err = c.seek([]byte("b"))
	require.ErrorContains(t, err, "levels of branch pages")
}
