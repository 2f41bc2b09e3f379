package journal

// newestMetaOf returns the meta page bbolt uses for the sound journal file
// whose bytes are data: the valid one of the two with the higher
// transaction id. Tests read a file's layout with it without opening it
// (a read-only Store refuses a format version 1 file).
func newestMetaOf(data []byte) (meta, bool) {
	m, ok := parseMeta(data)
	if !ok || m.pageSize >= uint64(len(data)) {
		return meta{}, false
	}
	if m1, ok1 := parseMeta(data[m.pageSize:]); ok1 && m1.txid > m.txid {
		m = m1
	}
	return m, true
}

// UsedBytes returns the bytes of the journal file whose bytes are data
// that its last commit uses (high-water mark × page size), or 0 when its
// first meta page is not valid.
func UsedBytes(data []byte) int64 {
	m, ok := newestMetaOf(data)
	if !ok {
		return 0
	}
	return int64(m.pgid * m.pageSize)
}
