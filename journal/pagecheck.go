package journal

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common), read by
// fileFits and pageHeaders.
const (
	pageHeaderSize  = 16 // id u64, flags u16, count u16, overflow u32
	pageElementSize = 16 // leaf: flags, pos, ksize, vsize u32; branch: pos, ksize u32, pgid u64
	branchPageFlag  = 0x01
	leafPageFlag    = 0x02
	freelistFlag    = 0x10
	bucketLeafFlag  = 0x01
	bucketHeader    = 16 // root pgid u64, sequence u64
	noFreelist      = ^uint64(0)

	// The meta page, after the page header: magic u32, version u32,
	// page size u32, flags u32, root bucket (pgid u64, sequence u64),
	// freelist pgid u64, high-water mark pgid u64, txid u64, checksum u64
	// (FNV-64a of everything before it).
	metaSize     = 64
	metaMagic32  = 0xED0CDAED
	metaVersion2 = 2
)

// meta is what the checks need from one of bbolt's two meta pages.
type meta struct {
	pageSize             uint64
	root, freelist, pgid uint64
	txid                 uint64
}

// parseMeta reads the meta page whose page header starts b, and reports
// whether bbolt would accept it.
func parseMeta(b []byte) (meta, bool) {
	if len(b) < pageHeaderSize+metaSize {
		return meta{}, false
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	le := binary.LittleEndian
	if le.Uint32(m[0:4]) != metaMagic32 || le.Uint32(m[4:8]) != metaVersion2 {
		return meta{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:64]) {
		return meta{}, false
	}
	return meta{
		pageSize: uint64(le.Uint32(m[8:12])),
		root:     le.Uint64(m[16:24]),
		freelist: le.Uint64(m[32:40]),
		pgid:     le.Uint64(m[40:48]),
		txid:     le.Uint64(m[48:56]),
	}, true
}

// newestMeta returns the meta page bbolt will use for the file f of size
// bytes: the valid one of the two with the higher transaction id, found
// the way bbolt finds them (the first page says the page size; if it is
// damaged, the second is looked for at every page size bbolt allows). ok
// is false when neither is valid: bbolt then refuses the file itself.
func newestMeta(f *os.File, size int64) (m meta, ok bool, err error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	readAt := func(off int64) (meta, bool, error) {
		if off+int64(len(buf)) > size {
			return meta{}, false, nil
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			return meta{}, false, err
		}
		m, ok := parseMeta(buf)
		return m, ok, nil
	}
	m0, ok0, err := readAt(0)
	if err != nil {
		return meta{}, false, err
	}
	var m1 meta
	var ok1 bool
	if ok0 && m0.pageSize > 0 {
		if m1, ok1, err = readAt(int64(m0.pageSize)); err != nil {
			return meta{}, false, err
		}
	} else {
		for i := range 15 { // 1 KiB to 16 MiB, as bbolt's getPageSizeFromSecondMeta
			if m1, ok1, err = readAt(1024 << i); err != nil || ok1 {
				break
			}
		}
		if err != nil {
			return meta{}, false, err
		}
	}
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		return m1, true, nil
	case ok0:
		return m0, true, nil
	}
	return meta{}, false, nil
}

// fileFits checks, before bbolt maps the file f of size bytes, that the
// meta page bbolt will trust describes a file that is all there: bbolt
// maps the file and reads its pages through the map, and a page past the
// end of the file is a SIGBUS that kills the process. A journal cut short
// (a copy or restore that stopped half-way, a disk that filled up during
// one) must fail closed instead. It also checks the freelist page, which
// bbolt reads while opening the file, before anything could recover a
// fault. A file without a valid meta page is left to bbolt to refuse.
func fileFits(f *os.File, size int64) error {
	m, ok, err := newestMeta(f, size)
	if err != nil || !ok {
		return err
	}
	return m.fits(f, size)
}

// truncated is the error for a journal file of size bytes whose last
// commit needs need.
func truncated(size, need int64) error {
	return withKind(ErrCorrupt, "truncated: the file is %d bytes, but its last commit needs %d; "+
		"restore the journal from a complete copy (idem check tells whether a copy is complete)", size, need)
}

// unfinished is the error for a file of size bytes cut short as bbolt
// made it, before its first commit: the meta pages bbolt writes then carry
// transaction ids 0 and 1, and the journal's first commit (initMeta) is
// 2, so no journal that held anything looks so. Made where the new
// journal's pages cannot be reserved (reserveNew: a file system without
// fallocate, a file-size limit), or by a process killed as it wrote them.
// Nothing in it can be lost; a truncated journal is another matter.
func unfinished(size, need int64) error {
	return withKind(ErrCorrupt, "cut short as it was created: the file is %d bytes of the %d bbolt writes to make a journal, and no commit followed, "+
		"so it never held an operation (the disk filled, or the process was killed, as it was made); remove it and start again", size, need)
}

// fits checks m against the file f of size bytes (see fileFits).
func (m meta) fits(f *os.File, size int64) error {
	switch {
	case m.pageSize < 1024 || m.pageSize > 1<<24:
		return withKind(ErrCorrupt, "damaged: a meta page gives a page size of %d bytes", m.pageSize)
	case m.pgid < 2:
		return withKind(ErrCorrupt, "damaged: the meta page gives %d pages", m.pgid)
	case m.pgid > uint64(size)/m.pageSize && m.txid <= 1:
		return unfinished(size, int64(m.pgid*m.pageSize))
	case m.pgid > uint64(size)/m.pageSize:
		return truncated(size, int64(m.pgid*m.pageSize))
	case m.root < 2 || m.root >= m.pgid:
		return withKind(ErrCorrupt, "damaged: the root page %d is outside the file's %d pages", m.root, m.pgid)
	case m.freelist == noFreelist:
		return nil
	}
	w := pageWalker{f: f, ps: m.pageSize, hwm: m.pgid, seen: make(map[uint64]bool)}
	if err := w.freelist(m.freelist); err != nil {
		return withKind(ErrCorrupt, "damaged: %w", err)
	}
	return nil
}

// pageHeaders reads, from f (the file tx reads), the header of every page
// that tx's buckets reach and of the freelist, and every element of their
// branch and leaf pages, and refuses what would send bbolt's own check
// (Tx.Check) or a copy (Compact) astray: a page id outside the file, a
// page that is not the one its parent names, a page count or overflow
// running past the file or the page, a key or value running past its page.
// bbolt trusts those numbers: a damaged overflow field made `idem check`
// insert up to 2^32 pages into a map until memory ran out, a wild page id
// makes it read outside the memory map on a goroutine of its own, where
// the fault kills the process, and a damaged value length made Compact
// copy from far past the map. It visits each page at most once.
func pageHeaders(tx *bolt.Tx, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	ps := uint64(tx.DB().Info().PageSize)
	hwm := uint64(tx.Size()) / ps
	if n := uint64(fi.Size()) / ps; n < hwm {
		return errorf("truncated: the file holds %d pages, its last commit needs %d", n, hwm)
	}
	w := pageWalker{f: f, ps: ps, hwm: hwm, seen: make(map[uint64]bool)}

	// The meta page of this transaction names the root and the freelist.
	var root, freelist uint64
	found := false
	for id := uint64(0); id < 2; id++ {
		b, err := w.read(id, 1)
		if err != nil {
			return err
		}
		if m, ok := parseMeta(b); ok && m.txid == uint64(tx.ID()) {
			root, freelist, found = m.root, m.freelist, true
		}
	}
	if !found {
		return errorf("no meta page for transaction %d", tx.ID())
	}
	if freelist != noFreelist {
		if err := w.freelist(freelist); err != nil {
			return err
		}
	}
	return w.tree(root)
}

type pageWalker struct {
	f    *os.File
	ps   uint64
	hwm  uint64 // pages in use: ids from 2 to hwm-1
	seen map[uint64]bool
}

// read returns pages id to id+n-1.
func (w *pageWalker) read(id, n uint64) ([]byte, error) {
	b := make([]byte, n*w.ps)
	if _, err := w.f.ReadAt(b, int64(id*w.ps)); err != nil {
		return nil, errorf("page %d: %w", id, err)
	}
	return b, nil
}

// page reads page id and its overflow, checking its header.
func (w *pageWalker) page(id uint64) (b []byte, flags uint16, count int, err error) {
	if id < 2 || id >= w.hwm {
		return nil, 0, 0, errorf("page %d: outside the file (%d pages)", id, w.hwm)
	}
	if w.seen[id] {
		return nil, 0, 0, errorf("page %d: reached twice", id)
	}
	w.seen[id] = true
	h, err := w.read(id, 1)
	if err != nil {
		return nil, 0, 0, err
	}
	overflow := uint64(binary.LittleEndian.Uint32(h[12:16]))
	switch {
	case binary.LittleEndian.Uint64(h[0:8]) != id:
		return nil, 0, 0, errorf("page %d: identifies as page %d", id, binary.LittleEndian.Uint64(h[0:8]))
	case id+overflow >= w.hwm:
		return nil, 0, 0, errorf("page %d: %d overflow pages run past the file (%d pages)", id, overflow, w.hwm)
	}
	// Without overflow h is the whole page: read again only a page that
	// has overflow pages to take.
	b = h
	if overflow > 0 {
		if b, err = w.read(id, overflow+1); err != nil {
			return nil, 0, 0, err
		}
	}
	return b, binary.LittleEndian.Uint16(h[8:10]), int(binary.LittleEndian.Uint16(h[10:12])), nil
}

// freelist checks the freelist page id: its header, its length, and that
// every page it calls free is a data page of the file (bbolt would hand
// out a meta page, or one past the end, to the next write).
func (w *pageWalker) freelist(id uint64) error {
	b, flags, count, err := w.page(id)
	if err != nil {
		return err
	}
	if flags != freelistFlag { // bbolt compares the whole field
		return errorf("page %d: the freelist page has flags %#x", id, flags)
	}
	n, first := uint64(count), uint64(0)
	if count == 0xFFFF { // the real count is the first element
		if len(b) < pageHeaderSize+8 {
			return errorf("page %d: freelist truncated", id)
		}
		n, first = binary.LittleEndian.Uint64(b[pageHeaderSize:]), 1
	}
	if n > (uint64(len(b))-pageHeaderSize)/8-first {
		return errorf("page %d: freelist of %d ids does not fit its pages", id, n)
	}
	for i := first; i < first+n; i++ {
		if free := binary.LittleEndian.Uint64(b[pageHeaderSize+8*i:]); free < 2 || free >= w.hwm {
			return errorf("page %d: the freelist holds page %d, outside the file (%d pages)", id, free, w.hwm)
		}
	}
	return nil
}

// tree walks the B+tree rooted at page id, and the trees of the buckets
// its leaves hold.
func (w *pageWalker) tree(id uint64) error {
	b, flags, count, err := w.page(id)
	if err != nil {
		return err
	}
	if flags != branchPageFlag && flags != leafPageFlag { // bbolt compares the whole field
		return errorf("page %d: neither a branch nor a leaf (flags %#x)", id, flags)
	}
	return w.elements(fmt.Sprintf("page %d", id), b, flags == branchPageFlag, count)
}

// elements checks the count elements of the branch or leaf page whose
// header starts b (a page with its overflow, or a bucket's inline page),
// where it is: every key and value inside b, and walks the pages they
// point to.
func (w *pageWalker) elements(where string, b []byte, branch bool, count int) error {
	if pageHeaderSize+count*pageElementSize > len(b) {
		return errorf("%s: %d elements do not fit the page", where, count)
	}
	le := binary.LittleEndian
	for i := range count {
		e := pageHeaderSize + i*pageElementSize
		el := b[e : e+pageElementSize]
		if branch {
			// pos and ksize are u32: their sum cannot overflow a uint64.
			if end := uint64(e) + uint64(le.Uint32(el[0:4])) + uint64(le.Uint32(el[4:8])); end > uint64(len(b)) {
				return errorf("%s: the key of element %d runs past the page", where, i)
			}
			if err := w.tree(le.Uint64(el[8:16])); err != nil {
				return err
			}
			continue
		}
		key := uint64(e) + uint64(le.Uint32(el[4:8]))
		val := key + uint64(le.Uint32(el[8:12]))
		end := val + uint64(le.Uint32(el[12:16]))
		if end > uint64(len(b)) {
			return errorf("%s: the key or value of element %d runs past the page", where, i)
		}
		if le.Uint32(el[0:4])&bucketLeafFlag == 0 {
			continue
		}
		// A bucket: its value starts with the bucket's root page, or 0
		// for an inline bucket, whose leaf page follows in the value.
		if end-val < bucketHeader {
			return errorf("%s: bucket element %d is too short", where, i)
		}
		if sub := le.Uint64(b[val : val+8]); sub != 0 {
			if err := w.tree(sub); err != nil {
				return err
			}
			continue
		}
		inline := b[val+bucketHeader : end]
		if len(inline) < pageHeaderSize {
			return errorf("%s: inline bucket %d is too short", where, i)
		}
		flags := le.Uint16(inline[8:10])
		if flags != leafPageFlag {
			return errorf("%s: inline bucket %d is not a leaf (flags %#x)", where, i, flags)
		}
		if err := w.elements(fmt.Sprintf("%s, inline bucket %d", where, i), inline, false, int(le.Uint16(inline[10:12]))); err != nil {
			return err
		}
	}
	return nil
}

// mapped is where the keys and values of one bucket of a read transaction
// may lie in memory: bbolt hands them out as slices of its memory map,
// with the offsets and lengths a page gives, and a damaged page gives
// lengths of gigabytes or offsets past the file. Formatting or decoding
// such a slice faults, or allocates until the process dies, before
// anything could notice; checking it first costs a few comparisons.
type mapped struct {
	lo, hi uintptr // the pages in use, [lo, hi); 0, 0 for no pointer check
	max    int     // the longest key or value there can be
	off    bool    // no check: a write transaction
}

// mappedOf returns the bounds for the keys and values of bucket b of tx.
// A write transaction's may be on the heap, as may those of an inline
// bucket (bbolt copies one that is not aligned): those of an inline
// bucket are only checked against the page size (an inline bucket is
// smaller than a page), and a write transaction's not at all (the
// applier's reads only pages it checked whole first, see vetPath).
func mappedOf(tx *bolt.Tx, b *bolt.Bucket) mapped {
	switch {
	case tx.Writable():
		return mapped{off: true}
	case b.Root() == 0:
		return mapped{max: tx.DB().Info().PageSize}
	}
	lo := tx.DB().Info().Data
	return mapped{lo: lo, hi: lo + uintptr(tx.Size()), max: int(tx.Size())}
}

// check returns an error matching ErrCorrupt if b, a key or value of the
// bucket m describes, cannot be one the file holds.
func (m mapped) check(b []byte) error {
	if len(b) == 0 || m.off {
		return nil
	}
	if len(b) > m.max {
		return withKind(ErrCorrupt, "damaged page: a key or value of %d bytes, where at most %d fit", len(b), m.max)
	}
	if m.hi == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < m.lo || p >= m.hi || uintptr(len(b)) > m.hi-p {
		return withKind(ErrCorrupt, "damaged page: a key or value of %d bytes lies outside the file", len(b))
	}
	return nil
}

// checkKV is check for a key and its value.
func (m mapped) checkKV(k, v []byte) error {
	if err := m.check(k); err != nil {
		return err
	}
	return m.check(v)
}
