package pgjournal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestByteaBytes: a bytea's bytes from each form pgx may hand over (see
// storedRecord): binary as it is, hex output, escape output (a doubled
// backslash, three octal digits for a byte), and escape output that
// neither form writes refused, not misread.
func TestByteaBytes(t *testing.T) {
	want := []byte{0xe1, 0xde, 0x01, '\\', 'a', 0x00, 0xff}
	for name, raw := range map[string]string{
		"binary": string(want),
		"hex":    `\xe1de015c6100ff`,
		"escape": `\341\336\001\\a\000\377`,
	} {
		got, err := byteaBytes([]byte(raw))
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
	for _, bad := range []string{`\341\3`, `\341\q00`, `\400`, `\`, `\xzz`} {
		_, err := byteaBytes([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}
