package journal_test

// A small bucket lives inline, as a page inside its value in the root
// bucket's leaf, and bbolt copies that value to the Go heap when it is not
// 8-byte aligned (bucket.go: openBucket), as the journal's "meta" and
// "due.seq" buckets are. A damaged inline page then sends bbolt's reads
// off that copy, into whatever the heap holds next: an element count
// larger than the copy made a -race build die at Open in checkptr
// ("unsafe.Slice result straddles multiple allocations", from
// Page.LeafPageElements under Bucket.Get), and a key offset sent off the
// copy points into the heap, where the race detector's range check of a
// read that runs past the heap faults inside its own runtime, on a stack
// debug.SetPanicOnFault cannot unwind ("traceback did not unwind
// completely"). Both kill the process; a damaged file must fail closed.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// rootValueOffset returns where, in the file data, the value of the
// top-level bucket name starts in the root bucket's leaf page of the
// newest meta page (a root that is one leaf: a journal's six buckets fit
// one). The page size is the file's, which bbolt records in its meta
// pages: the system's that wrote it (4 KiB on amd64, 16 KiB on arm64
// macOS, 64 KiB on some arm64 Linux kernels).
func rootValueOffset(t *testing.T, data []byte, name string) int {
	t.Helper()
	ps := int(binary.LittleEndian.Uint32(data[16+8 : 16+12])) // past the page header, the magic and the version
	require.Contains(t, []int{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}, ps, "page size in the first meta page")
	var root int
	var txid uint64
	for i := range 2 {
		m := data[i*ps+16:]
		if tx := binary.LittleEndian.Uint64(m[48:56]); tx >= txid {
			txid, root = tx, int(binary.LittleEndian.Uint64(m[16:24]))
		}
	}
	pg := data[root*ps : (root+1)*ps]
	require.Equal(t, uint16(0x02), binary.LittleEndian.Uint16(pg[8:10]), "the root bucket is one leaf page")
	for i := range int(binary.LittleEndian.Uint16(pg[10:12])) {
		e := 16 + 16*i
		pos := int(binary.LittleEndian.Uint32(pg[e+4:]))
		ksize := int(binary.LittleEndian.Uint32(pg[e+8:]))
		if string(pg[e+pos:e+pos+ksize]) == name {
			return root*ps + e + pos + ksize
		}
	}
	t.Fatalf("no bucket %q in the root page", name)
	return 0
}

// TestDamagedInlineBucketFailsClosed damages the inline page of the
// journal's "meta" and "due.seq" buckets, both copied to the heap by bbolt
// (their values are not 8-byte aligned in the layout of 4 KiB pages,
// checked below), and expects every Open to refuse the file with
// ErrCorrupt naming the bucket, the file left as it was. It does so in
// files of 4, 16 and 64 KiB pages, as systems of those page sizes write
// them, whatever this system's page size: Open reads a file at the page
// size its meta page gives.
func TestDamagedInlineBucketFailsClosed(t *testing.T) {
	const bucketHeader = 16 // root page id, sequence
	cases := []struct {
		name, bucket string
		damage       func(pg []byte) // the inline page, header first
	}{
		{"meta: element count past its page", "meta", func(pg []byte) {
			binary.LittleEndian.PutUint16(pg[10:12], 0x7e)
		}},
		{"due.seq: element count past its page", "due.seq", func(pg []byte) {
			binary.LittleEndian.PutUint16(pg[10:12], 0x0fff)
		}},
		{"due.seq: a key offset 16 MiB off its page", "due.seq", func(pg []byte) {
			e := 16 + 16*3 // a leaf element: flags, pos, ksize, vsize
			pos := binary.LittleEndian.Uint32(pg[e+4:])
			binary.LittleEndian.PutUint32(pg[e+4:], pos+16<<20)
		}},
		{"meta: a value length past its page", "meta", func(pg []byte) {
			e := 16 // the first element
			binary.LittleEndian.PutUint32(pg[e+12:], 0x00100000)
		}},
	}
	for _, ps := range []int{4 << 10, 16 << 10, 64 << 10} {
		img := imageOf(t, settledJournalOfPageSize(t, 300, ps))
		for _, c := range cases {
			t.Run(fmt.Sprintf("%d/%s", ps, c.name), func(t *testing.T) {
				data := bytes.Clone(img.data)
				off := rootValueOffset(t, data, c.bucket)
				if ps == 4<<10 {
					require.NotZero(t, off%8, "bucket %q: its value is aligned, so bbolt reads it in place: the layout changed, and the case no longer puts the page on the heap", c.bucket)
				}
				require.Zero(t, binary.LittleEndian.Uint64(data[off:off+8]), "bucket %q is not inline", c.bucket)
				c.damage(data[off+bucketHeader:])
				path := t.TempDir() + "/idem.journal"
				require.NoError(t, os.WriteFile(path, data, 0o600))

				for _, open := range []struct {
					name string
					opts []journal.Option
				}{{"read-only Open", []journal.Option{journal.ReadOnly()}}, {"Open for writing", nil}} {
					err := failsClosed(func() error {
						s, err := journal.Open(path, open.opts...)
						if err == nil {
							_ = s.Close()
							return errors.New("opened")
						}
						return err
					})
					require.ErrorIs(t, err, journal.ErrCorrupt, open.name)
					require.ErrorContains(t, err, `bucket "`+c.bucket+`"`, open.name)
				}
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Equal(data, after), "the damaged file was changed")
			})
		}
	}
}
