package journal

import (
	"encoding/binary"
	"math"
	"testing"
)

// The decoder reads a one-byte varint itself and leaves longer ones to
// encoding/binary: both ways must read what binary reads, consume what it
// consumes, and fail where it fails.
func TestDecoderVarintsAsBinary(t *testing.T) {
	var inputs [][]byte
	for b := range 256 {
		inputs = append(inputs, []byte{byte(b)}, []byte{byte(b), 0x05})
	}
	for _, v := range []uint64{0, 1, 127, 128, 300, 1 << 21, 1e9, 62135596800 << 1, math.MaxInt64, math.MaxUint64} {
		inputs = append(inputs, binary.AppendUvarint(nil, v))
	}
	inputs = append(inputs, nil, []byte{0x80}, []byte{0xff, 0xff}, // truncated
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}) // overflow
	for _, in := range inputs {
		checkVarint(t, "uvarint", in, (*decoder).uvarint, binary.Uvarint)
		checkVarint(t, "varint", in, (*decoder).varint, binary.Varint)
	}
}

func checkVarint[T uint64 | int64](t *testing.T, name string, in []byte, read func(*decoder) T, ref func([]byte) (T, int)) {
	t.Helper()
	d := decoder{b: in}
	got := read(&d)
	want, n := ref(in)
	if n <= 0 {
		if d.err == nil {
			t.Errorf("%s(%x) = %d, no error; binary fails", name, in, got)
		}
	} else if d.err != nil || got != want || len(d.b) != len(in)-n {
		t.Errorf("%s(%x) = %d, %d bytes left, %v; want %d, %d left", name, in, got, len(d.b), d.err, want, len(in)-n)
	}
}
