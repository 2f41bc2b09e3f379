package journal

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// A scan believes only pages that pass a check. bbolt's cursor trusts
// every number a page holds: a page whose element count a damaged disk
// block lowered, or a branch whose child's page id now names a sibling,
// still reads as a sound page, and the cursor walks past the entries it
// no longer reaches without a word. Due, ClaimDue and ForEachOpen (what
// Resume and Run read) then answered without some open records, and an
// operation whose outcome nobody knows was never settled.
//
// scanCursor walks a bucket as bbolt's cursor does, through the memory
// map (treeReader), and checks each page as it enters it, as bbolt's own
// consistency check (Tx.Check) does and more: its header, that its
// elements lie end to end after the element table as bbolt writes them
// (common.WriteInodeToPage: a count that changed no longer meets the
// first element), that its keys rise, and that they lie between the keys
// its parent gives its child (a child sent to a sibling holds the
// sibling's keys). It checks every element of the pages it enters,
// which a scan reads anyway; the pages it never enters it never trusts.
//
// Only read transactions: a write transaction's changed pages are not in
// the map. Only the journal's data buckets, which hold no nested bucket.

// scanCursor walks the entries of one bucket of a read transaction in key
// order. Its keys and values are the memory map's, valid until the
// transaction ends.
type scanCursor struct {
	r      treeReader
	name   []byte // the bucket's, for errors
	root   uint64 // 0: the bucket is inline
	inline []byte // its page then
	stack  []scanFrame
	// known, if not nil, holds the pages checked already (by any cursor
	// of the transaction), which enter checks again only against their
	// parent's keys.
	known map[uint64]keyRange
	// vetted is the key whose path the stack holds, as getter.pathOf
	// left it; empty when it holds none.
	vetted []byte
}

// keyRange is the first and last key of a checked page.
type keyRange struct{ first, last []byte }

// scanFrame is one checked page on the path to the cursor's entry.
type scanFrame struct {
	pg     []byte // the page, with its overflow
	n, i   int    // its elements, the one on the path
	branch bool
	hi     []byte // its keys lie below hi; nil: no bound
}

// newScanCursor returns a cursor over the bucket b, named name, of the
// read transaction tx.
func newScanCursor(tx *bolt.Tx, b *bolt.Bucket, name []byte) (*scanCursor, error) {
	c := &scanCursor{r: treeOf(tx), name: name, root: uint64(b.Root())}
	if c.root == 0 {
		pg, err := c.r.inlinePage(tx, name)
		if err != nil {
			return nil, c.damaged(err)
		}
		c.inline = pg
	}
	return c, nil
}

// damaged wraps err, the problem with a page of the cursor's bucket.
func (c *scanCursor) damaged(err error) error {
	return withKind(ErrCorrupt, "damaged page in bucket %q: %w", c.name, err)
}

// first returns the bucket's first entry, or a nil key when it is empty.
func (c *scanCursor) first() (k, v []byte, err error) {
	c.stack = c.stack[:0]
	if err := c.enter(c.root, nil, nil); err != nil {
		return nil, nil, err
	}
	return c.settle()
}

// seek returns the first entry whose key is at or after key, or a nil key
// when there is none.
func (c *scanCursor) seek(key []byte) (k, v []byte, err error) {
	if err := c.path(key); err != nil {
		return nil, nil, err
	}
	return c.settle()
}

// path enters the pages bbolt's search for key goes through, down to the
// leaf where key is or would be, and stops there.
//
// The pages already on the stack that key's path goes through stay there,
// unread: the root, and below it every page whose parent's search for key
// goes to it (holds). Entering them again would read and check the same
// bytes of the map with the same bounds, and pass as they did. The
// applier's paths mostly share all but their leaf: sequence keys, time
// keys and idem's UUIDv7 record keys each land at their tree's right edge.
func (c *scanCursor) path(key []byte) error {
	if len(c.stack) == 0 {
		if err := c.enter(c.root, nil, nil); err != nil {
			return err
		}
	} else {
		keep := 0
		for keep < len(c.stack)-1 && c.stack[keep].holds(key) {
			keep++
		}
		c.stack = c.stack[:keep+1]
	}
	for {
		f := &c.stack[len(c.stack)-1]
		i, exact := f.search(key)
		f.i = i
		if !f.branch {
			return nil
		}
		if !exact && i > 0 {
			f.i-- // the child whose keys start below key, as bbolt's
		}
		if err := c.down(); err != nil {
			return err
		}
	}
}

// next returns the entry after the last one returned, or a nil key at the
// end.
func (c *scanCursor) next() (k, v []byte, err error) {
	if len(c.stack) == 0 {
		return nil, nil, nil
	}
	c.stack[len(c.stack)-1].i++
	return c.settle()
}

// settle returns the entry at the cursor's position or, if that is past
// the end of its page, the next one there is, entering the pages on the
// way.
func (c *scanCursor) settle() (k, v []byte, err error) {
	for len(c.stack) > 0 {
		f := &c.stack[len(c.stack)-1]
		switch {
		case f.i >= f.n:
			c.stack = c.stack[:len(c.stack)-1]
			if len(c.stack) > 0 {
				c.stack[len(c.stack)-1].i++
			}
		case f.branch:
			if err := c.down(); err != nil {
				return nil, nil, err
			}
			// A new page, from its first element.
		default:
			k, v := leafEntry(f.pg, f.i)
			return k, v, nil
		}
	}
	return nil, nil, nil
}

// down enters the child of the branch page on top of the stack at its
// position.
func (c *scanCursor) down() error {
	f := &c.stack[len(c.stack)-1]
	id, lo, hi := f.child(f.i)
	return c.enter(id, lo, hi)
}

// child returns the page id of child i of the frame's branch page, and
// the bounds of the keys it may hold.
func (f *scanFrame) child(i int) (id uint64, lo, hi []byte) {
	lo, hi = branchKey(f.pg, i), f.hi
	if i+1 < f.n {
		hi = branchKey(f.pg, i+1)
	}
	e := pageHeaderSize + i*pageElementSize
	return binary.LittleEndian.Uint64(f.pg[e+8 : e+16]), lo, hi
}

// holds reports whether the search for key in the frame's branch page
// goes to its child at i: the child whose keys start at or below key (or
// the first), before the next child's.
func (f *scanFrame) holds(key []byte) bool {
	if f.i > 0 && bytes.Compare(branchKey(f.pg, f.i), key) > 0 {
		return false
	}
	return f.i+1 >= f.n || bytes.Compare(key, branchKey(f.pg, f.i+1)) < 0
}

// siblings checks, after path, the pages beside each page of the path
// under the same parent: bbolt merges a page that a deletion left small
// with one of them (node.rebalance), and writes the merged page back.
func (c *scanCursor) siblings() error {
	for j := range len(c.stack) - 1 {
		f := c.stack[j]
		for _, i := range [2]int{f.i - 1, f.i + 1} {
			if i < 0 || i >= f.n {
				continue
			}
			id, lo, hi := f.child(i)
			if _, err := c.load(id, lo, hi, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// enter checks page id (the bucket's root, or its inline page) and pushes
// it, positioned at its first element; its keys must lie in [lo, hi).
func (c *scanCursor) enter(id uint64, lo, hi []byte) error {
	if len(c.stack) == maxDepth {
		return c.damaged(errorf("page %d: more than %d levels of branch pages", id, maxDepth))
	}
	f, err := c.load(id, lo, hi, len(c.stack) == 0)
	if err != nil {
		return err
	}
	c.stack = append(c.stack, f)
	return nil
}

// load checks page id (the bucket's root if root, which may be its inline
// page), whose keys must lie in [lo, hi), and returns its frame.
func (c *scanCursor) load(id uint64, lo, hi []byte, root bool) (scanFrame, error) {
	pg := c.inline
	if !root || c.root != 0 {
		var err error
		if pg, err = c.r.page(id); err != nil {
			return scanFrame{}, c.damaged(err)
		}
		if kr, ok := c.known[id]; ok {
			if lo != nil && bytes.Compare(kr.first, lo) < 0 || hi != nil && bytes.Compare(kr.last, hi) >= 0 {
				return scanFrame{}, c.damaged(errorf("page %d: its keys lie outside those its parent gives it", id))
			}
			return scanFrame{pg: pg, n: int(binary.LittleEndian.Uint16(pg[10:12])),
				branch: binary.LittleEndian.Uint16(pg[8:10]) == branchPageFlag, hi: hi}, nil
		}
	}
	f, err := vetPage(pg, lo, hi, root)
	if err != nil {
		if root && c.root == 0 {
			return scanFrame{}, c.damaged(errorf("inline page: %w", err))
		}
		return scanFrame{}, c.damaged(errorf("page %d: %w", id, err))
	}
	if c.known != nil && (!root || c.root != 0) && f.n > 0 {
		c.known[id] = keyRange{f.key(0), f.key(f.n - 1)}
	}
	return f, nil
}

// vetPage checks the branch or leaf page pg (a page with its overflow, or
// an inline bucket's page) of a bucket that holds no nested bucket, whose
// keys must lie in [lo, hi) (nil: no bound); only a root leaf may be empty.
func vetPage(pg, lo, hi []byte, root bool) (scanFrame, error) {
	le := binary.LittleEndian
	flags := le.Uint16(pg[8:10])
	branch := flags == branchPageFlag
	if !branch && flags != leafPageFlag {
		return scanFrame{}, errorf("neither a branch nor a leaf (flags %#x)", flags)
	}
	n, err := count(pg)
	switch {
	case err != nil:
		return scanFrame{}, err
	case n == 0 && (branch || !root):
		// bbolt removes a page that lost its last element (node.rebalance).
		return scanFrame{}, errorf("a page without elements below the root")
	}
	// bbolt writes the keys and values end to end after the element
	// table, in element order.
	off := uint64(pageHeaderSize + n*pageElementSize)
	var prev []byte
	for i := range n {
		e := pageHeaderSize + i*pageElementSize
		el := pg[e : e+pageElementSize]
		var pos, ksize, size uint64
		if branch {
			pos, ksize = uint64(le.Uint32(el[0:4])), uint64(le.Uint32(el[4:8]))
			size = ksize
		} else {
			// bbolt reads only this bit of the flags; the others are
			// nothing to it, and so nothing to the journal.
			if le.Uint32(el[0:4])&bucketLeafFlag != 0 {
				return scanFrame{}, errorf("element %d is a nested bucket", i)
			}
			pos, ksize = uint64(le.Uint32(el[4:8])), uint64(le.Uint32(el[8:12]))
			size = ksize + uint64(le.Uint32(el[12:16]))
		}
		switch {
		case uint64(e)+pos != off:
			return scanFrame{}, errorf("element %d is not where the element before it ends (the element count or an offset changed)", i)
		case ksize == 0:
			return scanFrame{}, errorf("element %d has an empty key", i)
		case off+size > uint64(len(pg)):
			return scanFrame{}, errorf("element %d runs off the page", i)
		}
		k := pg[off : off+ksize]
		if i == 0 && lo != nil && bytes.Compare(k, lo) < 0 {
			return scanFrame{}, errorf("its first key lies below the key its parent gives it")
		}
		if i > 0 && bytes.Compare(prev, k) >= 0 {
			return scanFrame{}, errorf("the keys of elements %d and %d are out of order", i-1, i)
		}
		prev, off = k, off+size
	}
	if hi != nil && n > 0 && bytes.Compare(prev, hi) >= 0 {
		return scanFrame{}, errorf("its last key lies at or above the key of its parent's next child")
	}
	return scanFrame{pg: pg, n: n, branch: branch, hi: hi}, nil
}

// search is the package's search over the frame's page, without its
// checks: the page is checked whole (vetPage, or its key range in known
// for a page checked earlier in the transaction, which the memory map
// still shows as it was), so every key is on it and the keys rise. The
// checks that vetMiss needs on pages nothing checked cost two thirds of
// the applier's searches (a probe and both its neighbours read and
// compared), on the path of every key it reads or writes.
func (f *scanFrame) search(key []byte) (i int, exact bool) {
	lo, hi := 0, f.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch c := bytes.Compare(f.key(mid), key); {
		case c < 0:
			lo = mid + 1
		default:
			exact = exact || c == 0
			hi = mid
		}
	}
	return lo, exact
}

// key returns the key of element i of the frame's page.
func (f *scanFrame) key(i int) []byte {
	if f.branch {
		return branchKey(f.pg, i)
	}
	k, _ := leafEntry(f.pg, i)
	return k
}

// branchKey returns the key of element i of the checked branch page pg.
func branchKey(pg []byte, i int) []byte {
	e := pageHeaderSize + i*pageElementSize
	pos := uint64(e) + uint64(binary.LittleEndian.Uint32(pg[e:e+4]))
	return pg[pos : pos+uint64(binary.LittleEndian.Uint32(pg[e+4:e+8]))]
}

// leafEntry returns the key and value of element i of the checked leaf
// page pg.
func leafEntry(pg []byte, i int) (k, v []byte) {
	e := pageHeaderSize + i*pageElementSize
	le := binary.LittleEndian
	pos := uint64(e) + uint64(le.Uint32(pg[e+4:e+8]))
	kend := pos + uint64(le.Uint32(pg[e+8:e+12]))
	return pg[pos:kend], pg[kend : kend+uint64(le.Uint32(pg[e+12:e+16]))]
}
