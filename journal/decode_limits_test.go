package journal

// The record decoder fails closed, and within bounded memory, on damaged
// input.

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeRejectsEveryTruncation checks promise 10 (the decoder
// fails closed): every proper prefix of a full record, and the record with
// a byte appended, is an error matching ErrCorrupt, never a record with
// fields silently missing.
func TestDecodeRejectsEveryTruncation(t *testing.T) {
	r := fullRecord()
	r.Header.Add("X-Review-Multi", "one")
	r.Header.Add("X-Review-Multi", "two")
	enc := encode(nil, r)
	for n := range len(enc) {
		got, err := decode(enc[:n])
		require.ErrorIs(t, err, ErrCorrupt, "prefix of %d bytes", n)
		require.Nil(t, got)
	}
	_, err := decode(append(enc[:len(enc):len(enc)], 0))
	require.ErrorIs(t, err, ErrCorrupt, "trailing byte")
	got, err := decode(enc)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two"}, got.Header["X-Review-Multi"])
}

// TestDecodeAllocationBounded: decode promises to allocate "no more
// than a small multiple of len(b)". A header count is checked against the
// bytes left at 2 bytes an entry, then used as the map's size hint: a
// damaged record of 1 MiB makes decode allocate about 48 MiB before it
// fails (a 100 MiB value, about 5 GiB). The other counts cost at most
// 16 times their input.
func TestDecodeAllocationBounded(t *testing.T) {
	const size = 1 << 20
	b := []byte{magic0, magic1, formatVersion, 1, 0, 0, 0, 0, 0, 0, 0}
	b = binary.AppendUvarint(b, size/2-8)
	b = append(b, make([]byte, size)...)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err := decode(b)
	runtime.ReadMemStats(&m1)
	require.ErrorIs(t, err, ErrCorrupt)
	ratio := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(len(b))
	require.LessOrEqual(t, ratio, 20.0, "decode allocated %.0f times the record's size", ratio)
}
