package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// oldFormatCopy copies testdata/<version>/journal.db into a fresh
// directory and returns its path.
func oldFormatCopy(t *testing.T, version string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", version, "journal.db"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), version+".journal")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// rootPageOf returns the bytes of the file at path, and the page of its
// root bucket among them: in the old formats it holds every bucket, and
// the meta bucket inline.
func rootPageOf(t *testing.T, path string) (data, page []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	m, ok := newestMetaOf(data)
	require.True(t, ok, "a valid meta page")
	page = data[m.root*m.pageSize : (m.root+1)*m.pageSize]
	require.Equal(t, uint16(leafPageFlag), binary.LittleEndian.Uint16(page[8:10]), "the root bucket is one leaf")
	return data, page
}

// halveCount lowers the element count of page p, as a bad block may: every
// number on the page still fits it, and bbolt reads the page as a sound one
// without the elements the count no longer covers.
func halveCount(p []byte) {
	binary.LittleEndian.PutUint16(p[10:12], binary.LittleEndian.Uint16(p[10:12])/2)
}

// dropLast lowers the element count of page p by one.
func dropLast(p []byte) {
	binary.LittleEndian.PutUint16(p[10:12], binary.LittleEndian.Uint16(p[10:12])-1)
}

// wildOffsets points every leaf element of p far outside any page.
func wildOffsets(p []byte) {
	for i := range int(binary.LittleEndian.Uint16(p[10:12])) {
		e := pageHeaderSize + pageElementSize*i
		if e+pageElementSize > len(p) {
			break
		}
		binary.LittleEndian.PutUint32(p[e+4:e+8], 0x7ffffff0)
	}
}

// offsetsPastFile points every leaf element of p past the end of the file
// but within what bbolt will slice: reading it faults on the memory map.
func offsetsPastFile(p []byte) {
	for i := range int(binary.LittleEndian.Uint16(p[10:12])) {
		e := pageHeaderSize + pageElementSize*i
		if e+pageElementSize > len(p) {
			break
		}
		binary.LittleEndian.PutUint32(p[e+4:e+8], 0x20000000-uint32(e))
	}
}

// TestMigrationOfDamagedFileFailsClosed: an Open for writing migrates a
// format version 1 or 2 file in a write transaction that read and
// changed pages unchecked, outside the recovery every other write has. A
// damaged page of an old file made it panic out of Open (bbolt's
// assertion on a page's id, a slice out of range), or fault (SIGSEGV),
// or, worse, succeed: a leaf whose element count a bad block had lowered
// lost the records it no longer covered, and a root page lost a bucket,
// written back as a sound version 3 file. Each must fail with ErrCorrupt,
// say what to do, and leave the file byte for byte as it was.
func TestMigrationOfDamagedFileFailsClosed(t *testing.T) {
	// leaf and branch damage the i-th leaf, or the root, of a bucket.
	leaf := func(bucket string, i int, damage func([]byte)) func(*testing.T, string) []byte {
		return func(t *testing.T, path string) []byte {
			data, leaf := leavesOf(t, path, []byte(bucket))
			damage(leaf(i))
			return data
		}
	}
	branch := func(bucket string, damage func(data, root []byte, ps int)) func(*testing.T, string) []byte {
		return func(t *testing.T, path string) []byte {
			root, ps := bucketRoot(t, path, []byte(bucket))
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			damage(data, data[int(root)*ps:int(root+1)*ps], ps)
			return data
		}
	}
	root := func(damage func([]byte)) func(*testing.T, string) []byte {
		return func(t *testing.T, path string) []byte {
			data, page := rootPageOf(t, path)
			damage(page)
			return data
		}
	}
	cases := []struct {
		name, version string
		damage        func(*testing.T, string) []byte
	}{
		{"v1 record leaf, count lowered", "v1", leaf("done", 3, halveCount)},
		{"v1 record leaf, wrong page id", "v1", leaf("open", 1, func(p []byte) {
			binary.LittleEndian.PutUint64(p[0:8], binary.LittleEndian.Uint64(p[0:8])+12345)
		})},
		{"v1 record leaf, wild offsets", "v1", leaf("done", 0, wildOffsets)},
		{"v1 record leaf, offsets past the file", "v1", leaf("open", 2, offsetsPastFile)},
		{"v1 record branch, count lowered", "v1", branch("done", func(_, b []byte, _ int) { halveCount(b) })},
		{"v1 record branch, child sent to its sibling", "v1", branch("open", func(_, b []byte, _ int) {
			e := pageHeaderSize + pageElementSize
			copy(b[e+8:e+16], b[e+pageElementSize+8:e+pageElementSize+16])
		})},
		{"v1 index branch, count lowered", "v1", branch("due", func(_, b []byte, _ int) { halveCount(b) })},
		{"v1 index branch, child sent to a record leaf", "v1", func(t *testing.T, path string) []byte {
			// A page both bucket deletions free.
			done, ps := bucketRoot(t, path, []byte("done"))
			return branch("settled", func(data, b []byte, _ int) {
				d := data[int(done)*ps : int(done+1)*ps]
				copy(b[pageHeaderSize+8:pageHeaderSize+16], d[pageHeaderSize+8:pageHeaderSize+16])
			})(t, path)
		}},
		{"v1 root leaf, last bucket lost", "v1", root(dropLast)},
		{"v2 record leaf, count lowered", "v2", leaf("done.seq", 3, halveCount)},
		{"v2 root leaf, last bucket lost", "v2", root(dropLast)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := oldFormatCopy(t, tc.version)
			before := tc.damage(t, path)
			require.NoError(t, os.WriteFile(path, before, 0o600))

			err := failsClosed(func() error {
				s, err := Open(path, WithUnsafeNoSync())
				if err == nil {
					err = errors.Join(errors.New("opened"), s.Close(), CheckFile(path))
				}
				return err
			})
			require.ErrorIs(t, err, ErrCorrupt, "Open for writing of a damaged %s file", tc.version)
			t.Log(err)
			require.Contains(t, err.Error(), "the file is unchanged")
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			require.True(t, bytes.Equal(before, after), "a failed migration changed the file")
		})
	}
}
