package journal

import (
	"bytes"
	"encoding/binary"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// A key bbolt's search misses is believed absent only once the pages that
// search read pass a check. bbolt compares the key sought with the keys
// its branch and leaf elements point to, wherever they point: an element
// whose offset a damaged page sends off its page, past the pages in use or
// past the file, makes it compare with bytes that are not the page's keys
// and miss a key the file holds. Create then journaled a second record for
// an operation already taken on, Get said ErrNotFound. (A fault on the
// way is already ErrCorrupt, see readDamaged; reading garbage is not.)
//
// vetMiss searches again, as bbolt does (cursor.go: search, searchPage,
// nsearch), with every element it reads first checked to lie on its page.
// It checks only the elements the binary searches probe: the search's
// answer is decided by them, and an element off its page that could hide
// the key is one of them. Suppose the key's element j is off its page and
// never probed: the search ends at an index i whose element i-1 compared
// below the key and element i at or above it (or i is the page's end), so
// i-1 < j < i for sound elements, which no index is. A probe's key must
// also lie between its neighbours' (search): a bad byte inside a key,
// every offset left as it was, put it out of order and turned the search
// past keys the page holds (TestDamagedKeyOrderHidesNoKey). Checking
// every element of each page on the path (as pageWalker.elements does)
// cost about eight times as much as the probes (BenchmarkLookupMiss), on
// the path every new key takes.
//
// Only read transactions are vetted so: a write transaction reads the
// pages it changed from memory, which the file's map does not show. The
// applier's write transactions check instead every page on the path of
// every key they read or write, whole, before bbolt reads it (vetPath).

// treeReader reads the pages of one read transaction through its memory
// map.
type treeReader struct {
	mm []byte // the pages in use, [0, high-water mark × page size)
	ps uint64
	// edge, if not nil, is a key whose search from page edgeRoot (absent)
	// found every key it probed below it; see absent.
	edge     []byte
	edgeRoot uint64
}

// maxDepth bounds a search: a B+tree of pages of 1 KiB or more holding at
// most 2^48 bytes is far shallower, and a damaged page id can send a
// search round a loop.
const maxDepth = 32

// treeOf returns the reader of tx's pages. tx must be a read transaction:
// bbolt keeps its memory map in place until tx ends.
func treeOf(tx *bolt.Tx) treeReader {
	info := tx.DB().Info()
	// The map is bbolt's mmap, not memory of Go's: the GC neither moves nor
	// frees it, and tx holds bbolt's mmap lock. The uintptr is read as the
	// pointer it is.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&info.Data))
	return treeReader{mm: unsafe.Slice((*byte)(base), int(tx.Size())), ps: uint64(info.PageSize)}
}

// vetMiss returns nil if key is absent from bucket b (named name) of the
// read transaction tx, as bbolt's search just answered, and an error
// matching ErrCorrupt if a page that search reads is damaged, or if the
// key is there after all.
func vetMiss(tx *bolt.Tx, r *treeReader, b *bolt.Bucket, name, key []byte) error {
	if r.mm == nil {
		*r = treeOf(tx)
	}
	var found bool
	var err error
	if root := uint64(b.Root()); root != 0 {
		found, _, err = r.seek(root, key)
	} else {
		found, err = r.seekInline(tx, name, key)
	}
	switch {
	case err != nil:
		return withKind(ErrCorrupt, "damaged page in bucket %q: %w", name, err)
	case found:
		return withKind(ErrCorrupt, "damaged page in bucket %q: bbolt's search missed a key the bucket holds", name)
	}
	return nil
}

// seekInline is seek in the bucket named name of tx, a bucket small enough
// to be held inline.
func (r *treeReader) seekInline(tx *bolt.Tx, name, key []byte) (bool, error) {
	pg, err := r.inlinePage(tx, name)
	if err != nil {
		return false, err
	}
	found, _, err := searchLeaf(pg, key)
	return found, err
}

// inlinePage returns the page of the inline bucket named name of tx: the
// tail of its value in the root bucket.
func (r *treeReader) inlinePage(tx *bolt.Tx, name []byte) ([]byte, error) {
	found, v, err := r.seek(uint64(tx.Cursor().Bucket().Root()), name)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, errorf("the root bucket misses bucket %q", name)
	case len(v) < bucketHeader+pageHeaderSize || binary.LittleEndian.Uint64(v[0:8]) != 0:
		return nil, errorf("bucket %q: not an inline bucket", name)
	}
	pg := v[bucketHeader:]
	if flags := binary.LittleEndian.Uint16(pg[8:10]); flags != leafPageFlag {
		return nil, errorf("bucket %q: inline page is not a leaf (flags %#x)", name, flags)
	}
	return pg, nil
}

// vetRootBuckets checks, in the read transaction tx, the entry of every
// bucket the journal opens (names) in the root bucket, and the page of
// each one small enough to be held inline, before bbolt reads any of
// them. bbolt copies an inline bucket's value to the Go heap when it is
// not 8-byte aligned (openBucket), and then trusts the page's element
// count and offsets as it trusts a page of the file: a damaged one sends
// its reads off that copy, into the heap. In a -race build that kills
// the process, past any recover: checkptr refuses an element table that
// straddles allocations, and the race detector's check of a read that
// runs off the heap faults inside its own runtime, where
// debug.SetPanicOnFault cannot turn the fault into a panic to recover.
// Elsewhere bbolt reads other objects' bytes as keys and values. A bucket's header is read the same
// way, so a value too short for one is refused as well. Only writes of
// this process change these pages after Open, from what bbolt holds in
// memory, so Open checks them once.
func vetRootBuckets(tx *bolt.Tx, names [][]byte) error {
	r := treeOf(tx)
	root := uint64(tx.Cursor().Bucket().Root())
	for _, name := range names {
		found, v, err := r.seek(root, name)
		switch {
		case err != nil:
			return withKind(ErrCorrupt, "damaged root page: %w", err)
		case !found:
			continue // its absence is the caller's to judge
		case len(v) < bucketHeader:
			return withKind(ErrCorrupt, "damaged page in bucket %q: its header is %d bytes", name, len(v))
		case binary.LittleEndian.Uint64(v[0:8]) != 0:
			continue // not inline: its pages are the file's, checked where read
		case len(v) < bucketHeader+pageHeaderSize:
			return withKind(ErrCorrupt, "damaged page in bucket %q: an inline page of %d bytes", name, len(v)-bucketHeader)
		}
		if _, err := vetPage(v[bucketHeader:], nil, nil, true); err != nil {
			return withKind(ErrCorrupt, "damaged page in bucket %q: inline page: %w", name, err)
		}
	}
	return nil
}

// page returns page id with its overflow pages, its header checked.
func (r *treeReader) page(id uint64) ([]byte, error) {
	hwm := uint64(len(r.mm)) / r.ps
	if id < 2 || id >= hwm {
		return nil, errorf("page %d: outside the file (%d pages)", id, hwm)
	}
	h := r.mm[id*r.ps:]
	switch overflow := uint64(binary.LittleEndian.Uint32(h[12:16])); {
	case binary.LittleEndian.Uint64(h[0:8]) != id:
		return nil, errorf("page %d: identifies as page %d", id, binary.LittleEndian.Uint64(h[0:8]))
	case id+overflow >= hwm:
		return nil, errorf("page %d: %d overflow pages run past the file (%d pages)", id, overflow, hwm)
	default:
		return r.mm[id*r.ps : (id+overflow+1)*r.ps], nil
	}
}

// seek searches the tree rooted at page root for key, and returns whether
// it holds it, and its value.
func (r *treeReader) seek(root uint64, key []byte) (found bool, v []byte, err error) {
	pg, id, _, i, exact, _, _, err := r.leaf(root, key)
	if err != nil || !exact {
		return false, nil, err
	}
	if v, err = leafValue(pg, i); err != nil {
		return false, nil, errorf("page %d: %w", id, err)
	}
	return true, v, nil
}

// leaf searches the tree rooted at page root for key, as bbolt's cursor
// does, down to the leaf page pg (page id, n elements) where key is or
// would be: at element i, which holds key if exact. last says the search
// took the last child of every branch page on its way; below, that every
// key it probed, of every page, compared below key.
func (r *treeReader) leaf(root uint64, key []byte) (pg []byte, id uint64, n, i int, exact, last, below bool, err error) {
	id, last, below = root, true, true
	for range maxDepth {
		if pg, err = r.page(id); err != nil {
			return nil, 0, 0, 0, false, false, false, err
		}
		switch flags := binary.LittleEndian.Uint16(pg[8:10]); flags {
		case leafPageFlag:
			if n, err = count(pg); err == nil {
				i, exact, err = search(pg, n, key, false)
			}
			if err != nil {
				return nil, 0, 0, 0, false, false, false, errorf("page %d: %w", id, err)
			}
			// A binary search ends past the end only if every probe
			// went right.
			return pg, id, n, i, exact, last, below && i == n, nil
		case branchPageFlag:
			child, lastChild, past, err := searchBranch(pg, key)
			if err != nil {
				return nil, 0, 0, 0, false, false, false, errorf("page %d: %w", id, err)
			}
			id, last, below = child, last && lastChild, below && past
		default:
			return nil, 0, 0, 0, false, false, false, errorf("page %d: neither a branch nor a leaf (flags %#x)", id, flags)
		}
	}
	return nil, 0, 0, 0, false, false, false, errorf("page %d: more than %d levels of branch pages", id, maxDepth)
}

// absent reports whether the tree rooted at page root surely lacks key:
// its search (leaf) passed every check and ended on an element of its
// leaf that is not key, or past the last element of the tree's last leaf
// (a key above all others: a time-ordered key, as idem's are). bbolt's
// search then reads the same pages and elements, and misses too; past
// the last leaf its cursor finds every page on its path at its last
// element (Cursor.next) and reads no other. A search that ends past the
// last element of another leaf is not sure: bbolt's cursor goes on to
// read the next leaf.
//
// A search that found every key it probed below its key is remembered
// (edge): the search for a key at or above that one makes the same probes,
// compares each the same way, passes the same checks on the same bytes (a
// read transaction's pages do not change) and ends past the end as well,
// so it is not made again. A create's key is above every key in the file
// mostly (UUIDv7, in one scope): one search per kept transaction, then a
// compare per create.
func (r *treeReader) absent(root uint64, key []byte) bool {
	if r.edge != nil && r.edgeRoot == root && bytes.Compare(r.edge, key) <= 0 {
		return true
	}
	_, _, n, i, exact, last, below, err := r.leaf(root, key)
	if err == nil && below {
		r.edge, r.edgeRoot = append(r.edge[:0], key...), root
	}
	return err == nil && !exact && (i < n || last)
}

// elementKey returns the key of element i of the page pg (a branch's if
// branch), once checked to lie on the page.
func elementKey(pg []byte, i int, branch bool) ([]byte, error) {
	e := pageHeaderSize + i*pageElementSize
	el := pg[e : e+pageElementSize]
	pos, ksize := binary.LittleEndian.Uint32(el[4:8]), binary.LittleEndian.Uint32(el[8:12])
	if branch {
		pos, ksize = binary.LittleEndian.Uint32(el[0:4]), binary.LittleEndian.Uint32(el[4:8])
	}
	// u32 offsets from an int: their sum cannot overflow a uint64.
	start := uint64(e) + uint64(pos)
	if end := start + uint64(ksize); end > uint64(len(pg)) {
		return nil, errorf("the key of element %d runs off the page", i)
	}
	return pg[start : start+uint64(ksize)], nil
}

// count returns the element count of the page pg, checked to fit it.
func count(pg []byte) (int, error) {
	n := int(binary.LittleEndian.Uint16(pg[10:12]))
	if pageHeaderSize+n*pageElementSize > len(pg) {
		return 0, errorf("%d elements do not fit the page", n)
	}
	return n, nil
}

// search is sort.Search over the n elements of pg for the first key at or
// above key, as bbolt's, and reports whether that key is key. Each key it
// probes must lie between its neighbours: a probe whose key a damaged
// byte moved past the key sought turns the search the wrong way, past
// keys the page holds, and is then out of order with its neighbour on the
// sought key's side (unless that neighbour is damaged too).
func search(pg []byte, n int, key []byte, branch bool) (i int, exact bool, err error) {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		k, err := elementKey(pg, mid, branch)
		if err != nil {
			return 0, false, err
		}
		for _, j := range [2]int{mid - 1, mid + 1} {
			if j < 0 || j >= n {
				continue
			}
			nk, err := elementKey(pg, j, branch)
			if err != nil {
				return 0, false, err
			}
			if (j < mid) != (bytes.Compare(nk, k) < 0) {
				return 0, false, errorf("the keys of elements %d and %d are out of order", min(j, mid), max(j, mid))
			}
		}
		switch c := bytes.Compare(k, key); {
		case c < 0:
			lo = mid + 1
		default:
			exact = exact || c == 0
			hi = mid
		}
	}
	return lo, exact, nil
}

// searchBranch returns the child of the branch page pg that may hold key,
// whether it is the page's last, and whether every key the search probed
// compared below key (it ended past the page's end).
func searchBranch(pg, key []byte) (child uint64, last, past bool, err error) {
	n, err := count(pg)
	if err != nil {
		return 0, false, false, err
	}
	if n == 0 {
		return 0, false, false, errorf("a branch without elements")
	}
	i, exact, err := search(pg, n, key, true)
	if err != nil {
		return 0, false, false, err
	}
	past = i == n
	if !exact && i > 0 {
		i--
	}
	e := pageHeaderSize + i*pageElementSize
	return binary.LittleEndian.Uint64(pg[e+8 : e+16]), i == n-1, past, nil
}

// searchLeaf reports whether the leaf page pg holds key, and its value.
func searchLeaf(pg, key []byte) (bool, []byte, error) {
	n, err := count(pg)
	if err != nil {
		return false, nil, err
	}
	i, exact, err := search(pg, n, key, false)
	if err != nil || !exact {
		return false, nil, err
	}
	v, err := leafValue(pg, i)
	return err == nil, v, err
}

// leafValue returns the value of element i of the leaf page pg, once
// checked to lie on the page.
func leafValue(pg []byte, i int) ([]byte, error) {
	e := pageHeaderSize + i*pageElementSize
	el := pg[e : e+pageElementSize]
	vstart := uint64(e) + uint64(binary.LittleEndian.Uint32(el[4:8])) + uint64(binary.LittleEndian.Uint32(el[8:12]))
	vend := vstart + uint64(binary.LittleEndian.Uint32(el[12:16]))
	if vend > uint64(len(pg)) {
		return nil, errorf("the value of element %d runs off the page", i)
	}
	return pg[vstart:vend], nil
}
