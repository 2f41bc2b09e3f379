package journal

import (
	"encoding/binary"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common), read by
// pageHeaders.
const (
	pageHeaderSize  = 16 // id u64, flags u16, count u16, overflow u32
	pageElementSize = 16 // leaf: flags, pos, ksize, vsize u32; branch: pos, ksize u32, pgid u64
	branchPageFlag  = 0x01
	leafPageFlag    = 0x02
	freelistFlag    = 0x10
	bucketLeafFlag  = 0x01
	bucketHeader    = 16 // root pgid u64, sequence u64
	noFreelist      = ^uint64(0)
)

// pageHeaders reads, straight from the file, the header of every page that
// tx's buckets reach and of the freelist, and refuses what would send
// bbolt's own check (Tx.Check) astray: a page id outside the file, a page
// that is not the one its parent names, a page count or overflow running
// past the file or the page. bbolt trusts those numbers: a damaged
// overflow field made `idem check` insert up to 2^32 pages into a map
// until memory ran out, and a wild page id makes it read outside the
// memory map on a goroutine of its own, where the fault kills the process.
// It visits each page at most once.
func pageHeaders(tx *bolt.Tx) error {
	f, err := os.Open(tx.DB().Path())
	if err != nil {
		return err
	}
	defer f.Close()
	ps := uint64(tx.DB().Info().PageSize)
	hwm := uint64(tx.Size()) / ps
	w := pageWalker{f: f, ps: ps, hwm: hwm, seen: make(map[uint64]bool)}

	// The meta page of this transaction names the root and the freelist.
	var root, freelist uint64
	found := false
	for id := uint64(0); id < 2; id++ {
		b, err := w.read(id, 1)
		if err != nil {
			return err
		}
		m := b[pageHeaderSize:]
		if binary.LittleEndian.Uint64(m[48:56]) == uint64(tx.ID()) {
			root, freelist, found = binary.LittleEndian.Uint64(m[16:24]), binary.LittleEndian.Uint64(m[32:40]), true
		}
	}
	if !found {
		return fmt.Errorf("no meta page for transaction %d", tx.ID())
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
	hwm  uint64
	seen map[uint64]bool
}

// read returns pages id to id+n-1.
func (w *pageWalker) read(id, n uint64) ([]byte, error) {
	b := make([]byte, n*w.ps)
	if _, err := w.f.ReadAt(b, int64(id*w.ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return b, nil
}

// page reads page id and its overflow, checking its header.
func (w *pageWalker) page(id uint64) (b []byte, flags uint16, count int, err error) {
	if id < 2 || id >= w.hwm {
		return nil, 0, 0, fmt.Errorf("page %d: outside the file (%d pages)", id, w.hwm)
	}
	if w.seen[id] {
		return nil, 0, 0, fmt.Errorf("page %d: reached twice", id)
	}
	w.seen[id] = true
	h, err := w.read(id, 1)
	if err != nil {
		return nil, 0, 0, err
	}
	overflow := uint64(binary.LittleEndian.Uint32(h[12:16]))
	switch {
	case binary.LittleEndian.Uint64(h[0:8]) != id:
		return nil, 0, 0, fmt.Errorf("page %d: identifies as page %d", id, binary.LittleEndian.Uint64(h[0:8]))
	case id+overflow >= w.hwm:
		return nil, 0, 0, fmt.Errorf("page %d: %d overflow pages run past the file (%d pages)", id, overflow, w.hwm)
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

func (w *pageWalker) freelist(id uint64) error {
	b, flags, count, err := w.page(id)
	if err != nil {
		return err
	}
	if flags&freelistFlag == 0 {
		return fmt.Errorf("page %d: the freelist page has flags %#x", id, flags)
	}
	n, first := uint64(count), uint64(0)
	if count == 0xFFFF { // the real count is the first element
		if len(b) < pageHeaderSize+8 {
			return fmt.Errorf("page %d: freelist truncated", id)
		}
		n, first = binary.LittleEndian.Uint64(b[pageHeaderSize:]), 1
	}
	if n > (uint64(len(b))-pageHeaderSize)/8-first {
		return fmt.Errorf("page %d: freelist of %d ids does not fit its pages", id, n)
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
	if pageHeaderSize+count*pageElementSize > len(b) {
		return fmt.Errorf("page %d: %d elements do not fit the page", id, count)
	}
	for i := range count {
		e := pageHeaderSize + i*pageElementSize
		el := b[e : e+pageElementSize]
		switch {
		case flags&branchPageFlag != 0:
			if err := w.tree(binary.LittleEndian.Uint64(el[8:16])); err != nil {
				return err
			}
		case flags&leafPageFlag != 0:
			if binary.LittleEndian.Uint32(el[0:4])&bucketLeafFlag == 0 {
				continue
			}
			// A bucket: its value starts with the bucket's root page, 0
			// for an inline bucket (which bbolt's check skips).
			pos := uint64(e) + uint64(binary.LittleEndian.Uint32(el[4:8])) + uint64(binary.LittleEndian.Uint32(el[8:12]))
			if pos+bucketHeader > uint64(len(b)) {
				return fmt.Errorf("page %d: bucket element %d points outside the page", id, i)
			}
			if sub := binary.LittleEndian.Uint64(b[pos : pos+8]); sub != 0 {
				if err := w.tree(sub); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("page %d: neither a branch nor a leaf (flags %#x)", id, flags)
		}
	}
	return nil
}
