package journal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// walkAll returns every entry c shows, from first to end, or its error.
func walkAll(c *scanCursor, limit int) (keys, values [][]byte, err error) {
	k, v, err := c.first()
	for ; err == nil && k != nil; k, v, err = c.next() {
		if len(keys) == limit {
			return nil, nil, fmt.Errorf("more than %d entries: the walk does not end", limit)
		}
		keys, values = append(keys, k), append(values, v)
	}
	return keys, values, err
}

// TestScanCursorAgreesWithBbolt: on a sound file, the checked cursor of
// the scans shows exactly what bbolt's cursor shows, walking and seeking
// (a false alarm would fail every Resume), whatever the tree's shape: a
// bucket held inline, one spanning several levels of branch pages, one
// whose entries need overflow pages, and one whose records were created,
// settled and pruned; each data bucket of each.
func TestScanCursorAgreesWithBbolt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := []struct {
		name string
		make func(t *testing.T) *Store
	}{
		{"inline", func(t *testing.T) *Store {
			s, _ := absentJournal(t, 12, func(int) int { return 8 })
			return s
		}},
		{"levels", func(t *testing.T) *Store {
			s, _ := absentJournal(t, 20000, func(int) int { return 7 + rng.IntN(200) })
			return s
		}},
		{"overflow", func(t *testing.T) *Store {
			s, _ := absentJournal(t, 300, func(i int) int { return 7 + (i%5)*3000 })
			return s
		}},
		{"settled and pruned", func(t *testing.T) *Store {
			// Deletions all over the trees: bbolt merges and removes
			// the pages they empty (node.rebalance).
			ctx := context.Background()
			s, rks := absentJournal(t, 6000, func(int) int { return 12 })
			for i, rk := range rks {
				if i%5 == 0 {
					continue
				}
				at := rvT0.Add(time.Duration(rng.IntN(1000)) * time.Minute)
				_, err := s.Update(ctx, "s", string(rk[2:]), func(r *Record) error {
					r.State, r.Settled, r.Updated = StateSucceeded, at, at
					return nil
				})
				require.NoError(t, err)
			}
			_, err := s.Prune(ctx, rvT0.Add(500*time.Minute))
			require.NoError(t, err)
			require.NoError(t, s.Checkpoint(ctx))
			return s
		}},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			s := sh.make(t)
			require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
				for _, name := range dataBuckets {
					b := tx.Bucket(name)
					c, err := newScanCursor(tx, b, name)
					require.NoError(t, err, "bucket %s", name)
					keys, values, err := walkAll(c, 1<<20)
					require.NoError(t, err, "bucket %s", name)
					var want, wantV [][]byte
					require.NoError(t, b.ForEach(func(k, v []byte) error {
						want, wantV = append(want, k), append(wantV, v)
						return nil
					}))
					require.Equal(t, want, keys, "bucket %s: keys", name)
					require.Equal(t, wantV, values, "bucket %s: values", name)

					// Seek every key, a key just before and just after it,
					// and keys before and after them all.
					probes := [][]byte{{0}, bytes.Repeat([]byte{0xff}, 300)}
					for _, k := range want {
						probes = append(probes, k, append(bytes.Clone(k), 0), k[:len(k)-1])
					}
					bc := b.Cursor()
					for _, p := range probes {
						wk, wv := bc.Seek(p)
						gk, gv, err := c.seek(p)
						require.NoError(t, err, "bucket %s: seek(%.40q)", name, p)
						require.Equal(t, wk, gk, "bucket %s: seek(%.40q)", name, p)
						require.Equal(t, wv, gv, "bucket %s: seek(%.40q)", name, p)
						wk, _ = bc.Next()
						gk, _, err = c.next()
						require.NoError(t, err, "bucket %s: next after seek(%.40q)", name, p)
						require.Equal(t, wk, gk, "bucket %s: next after seek(%.40q)", name, p)
					}
				}
				return nil
			}))
		})
	}
}

// FuzzScanCursor: the scans' cursor reads pages that may be damaged in
// any way; whatever the bytes, a walk must end (no loop, no endless
// descent) and never panic (its slicing is all its own checks), and what
// it shows without an error must be in order.
func FuzzScanCursor(f *testing.F) {
	image, ps, root, rks := keysImage(f)

	f.Add(uint32(root*ps+10), []byte{0x01, 0x00}, rks[1])               // the root's count: 1
	f.Add(uint32(root*ps+16+8), []byte{byte(root)}, rks[2000])          // a child that is the root
	f.Add(uint32(root*ps+16+4), []byte{0xff, 0xff, 0xff, 0x7f}, rks[5]) // a wild key size
	f.Add(uint32(root*ps+8), []byte{0x10}, []byte("s\x00zzz"))          // not a branch
	f.Fuzz(func(t *testing.T, at uint32, patch, key []byte) {
		defer damageImage(image, root, ps, at, patch)()
		c := &scanCursor{r: treeReader{mm: image, ps: ps}, name: bucketKeys, root: root}
		keys, _, err := walkAll(c, 2*len(rks))
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
		for i := 1; i < len(keys); i++ {
			require.Negative(t, bytes.Compare(keys[i-1], keys[i]), "entries %d and %d out of order", i-1, i)
		}
		_, _, _ = c.seek(key)
		_, _, _ = c.next()
	})
}
