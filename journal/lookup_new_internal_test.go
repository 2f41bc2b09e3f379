package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestLookupNewAgreesWithLookup: a create's look into the file
// (lookupNew, which takes a miss its checked search is sure of as the
// answer, without bbolt's search) answers what lookup answers, on a sound
// key index and on ones damaged at random, through a getter kept across
// lookups as the committer's kept transaction reads: the same sequence
// key and record, and ErrCorrupt exactly when lookup says ErrCorrupt. A
// damaged page must be refused as before; a miss is never taken from a
// search that read one, nor from a remembered search past the end
// (treeReader.edge) that a later key would not repeat exactly.
func TestLookupNewAgreesWithLookup(t *testing.T) {
	image, ps, root, rks := keysImage(t)
	rng := rand.New(rand.NewPCG(7, 11))
	var probes [][]byte
	for i := 0; i < len(rks); i += 7 {
		rk := rks[i]
		probes = append(probes, rk,
			append(bytes.Clone(rk), 0),
			append(bytes.Clone(rk[:len(rk)-1]), rk[len(rk)-1]+1),
			rk[:len(rk)-1])
	}
	probes = append(probes, []byte{0}, []byte("s"), []byte("s\x00"), []byte("t"), bytes.Repeat([]byte{0xff}, 300))
	// Keys above every key, rising, as idem's UUIDv7 keys come, between
	// the others: the searches past the end that absent remembers.
	for i := range 200 {
		at := rng.IntN(len(probes))
		probes = slices.Insert(probes, at, fmt.Appendf(nil, "s\x00%06d-%04d", len(rks)+i/4, i))
	}

	dir := t.TempDir()
	var misses, remembered, refused, opened int
	for round := range 150 {
		restore := func() {}
		if round > 0 {
			// Bytes of the key index's root or the pages after it
			// (damageImage: an odd first byte), at random.
			patch := make([]byte, 1+rng.IntN(8))
			for i := range patch {
				patch[i] = byte(rng.Uint32())
			}
			patch[0] |= 1
			restore = damageImage(image, root, ps, rng.Uint32(), patch)
		}
		path := filepath.Join(dir, fmt.Sprintf("j%d.db", round))
		require.NoError(t, os.WriteFile(path, image, 0o600))
		restore()
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			continue // damage bbolt itself refuses at Open
		}
		opened++
		var old, fresh getter
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			for _, rk := range probes {
				var sk, v, newSK, newV []byte
				if e := fresh.tree.edge; e != nil && bytes.Compare(e, rk) <= 0 {
					remembered++
				}
				err := readDamaged(func() (err error) {
					sk, v, err = old.lookup(tx, rk)
					return err
				})
				newErr := readDamaged(func() (err error) {
					newSK, newV, err = fresh.lookupNew(tx, rk)
					return err
				})
				require.Equal(t, errors.Is(err, ErrCorrupt), errors.Is(newErr, ErrCorrupt), "round %d, key %.40q: lookup %v, lookupNew %v", round, rk, err, newErr)
				require.Equal(t, err == nil, newErr == nil, "round %d, key %.40q: lookup %v, lookupNew %v", round, rk, err, newErr)
				if err != nil {
					refused++
					continue
				}
				if v == nil {
					misses++
				}
				require.Equal(t, sk, newSK, "round %d, key %.40q", round, rk)
				require.Equal(t, v, newV, "round %d, key %.40q", round, rk)
			}
			return nil
		}))
		require.NoError(t, db.Close())
	}
	// Every way was taken: misses, misses past the end remembered, and
	// damage refused.
	require.Greater(t, opened, 100, "files bbolt opened")
	require.Greater(t, misses, 100000, "misses")
	require.Greater(t, remembered, 10000, "misses past a remembered search")
	require.Greater(t, refused, 300, "lookups refused as damaged")
}
