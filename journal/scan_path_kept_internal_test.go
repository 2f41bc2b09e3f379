package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanPathKeepsOnlyItsOwnPages: a cursor's path that keeps the pages
// already on its stack that the new key's path goes through (as the
// applier's checks of the path of every key it reads or writes do, in key
// order or not) ends with the stack, and fails with the error, of a path
// entered from the root, on a key index of three levels, sound and
// damaged at random: a page it keeps unread is one the search would have
// entered and passed again.
func TestScanPathKeepsOnlyItsOwnPages(t *testing.T) {
	s, rks := absentJournal(t, 20000, func(i int) int { return 7 + i%40 })
	require.NoError(t, s.Close())
	image, ps, root := fileImage(t, s.path)

	rng := rand.New(rand.NewPCG(5, 9))
	ascending := slices.Clone(rks[len(rks)-400:]) // the right edge, in order
	var keys [][]byte
	for i := range 900 {
		switch i % 3 {
		case 0:
			keys = append(keys, ascending[(i/3)%len(ascending)])
		case 1:
			keys = append(keys, rks[rng.IntN(len(rks))])
		default:
			rk := rks[rng.IntN(len(rks))]
			keys = append(keys, append(bytes.Clone(rk), 0), []byte{0}, bytes.Repeat([]byte{0xff}, 10))
		}
	}
	// And the right edge in order, one key after another: a leaf's last
	// key, then the next leaf's first, the key its parent's next element
	// holds, whose path leaves the leaf the last one took.
	keys = append(keys, ascending...)
	var kept, damaged int
	for round := range 60 {
		r := treeReader{mm: image, ps: ps}
		restore := func() {}
		if round > 0 {
			// A page on the path of one of the keys.
			c := &scanCursor{r: r, name: bucketKeys, root: root}
			require.NoError(t, c.path(keys[rng.IntN(len(keys))]))
			f := c.stack[rng.IntN(len(c.stack))]
			at := binary.LittleEndian.Uint64(f.pg[0:8])*ps + uint64(rng.IntN(int(ps)))
			patch := make([]byte, 1+rng.IntN(6))
			for i := range patch {
				patch[i] = byte(rng.Uint32())
			}
			patch[0] &^= 1 // at at
			restore = damageImage(image, root, ps, uint32(at), patch)
		}
		reuse := &scanCursor{r: r, name: bucketKeys, root: root, known: map[uint64]keyRange{}}
		fresh := &scanCursor{r: r, name: bucketKeys, root: root, known: map[uint64]keyRange{}}
		for n, key := range keys {
			before := len(reuse.stack)
			err := reuse.path(key)
			fresh.stack = fresh.stack[:0] // as path did before it kept pages
			want := fresh.path(key)
			if want != nil {
				damaged++
				require.EqualError(t, err, want.Error(), "round %d, key %d", round, n)
			} else {
				require.NoError(t, err, "round %d, key %d", round, n)
			}
			require.Equal(t, fmt.Sprint(frames(fresh)), fmt.Sprint(frames(reuse)), "round %d, key %d: the stack", round, n)
			if before > 1 && len(reuse.stack) > 1 {
				kept++
			}
		}
		restore()
	}
	require.Greater(t, kept, 50000, "paths that began with pages kept")
	require.Greater(t, damaged, 2000, "paths that met a damaged page")
}

// frames is what a cursor's stack says: each page, its bounds and the
// element on the path.
func frames(c *scanCursor) []string {
	var out []string
	for _, f := range c.stack {
		out = append(out, fmt.Sprintf("%p/%d n=%d i=%d branch=%t hi=%q", f.pg, len(f.pg), f.n, f.i, f.branch, f.hi))
	}
	return out
}
