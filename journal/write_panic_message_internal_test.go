package journal

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// outOfRange indexes b at i: a runtime error of the journal's own when i
// is past b's end, as a bug would raise.
func outOfRange(b []byte, i int) byte { return b[i] }

// TestWritePanicSaysWhatWasSeen: a write transaction that panicked with
// any runtime error failed closed with "damaged page met while writing
// the journal file (bbolt: …)", whether bbolt had tripped on a damaged
// page or the journal's own code had a bug: the operator was told to
// restore a file that may have been sound. It still fails closed, with
// ErrCorrupt, but says where the panic was raised, with its value, and
// whether that was inside bbolt.
func TestWritePanicSaysWhatWasSeen(t *testing.T) {
	key, value := []byte("s\x00k00000"), []byte("12345678")
	cases := []struct {
		name   string
		damage func(page []byte) // of the key index's first leaf; nil: none
		fn     func(tx *bolt.Tx) error
		says   []string
	}{
		{"a bug outside bbolt", nil, func(*bolt.Tx) error {
			outOfRange(nil, len(key))
			return nil
		}, []string{"panic in github.com/idemkit/idem/journal.outOfRange", "outside bbolt", "index out of range [8] with length 0", "report this message"}},
		{"bbolt's assertion on a damaged page", func(p []byte) {
			binary.LittleEndian.PutUint64(p[0:8], binary.LittleEndian.Uint64(p[0:8])+12345)
		}, func(tx *bolt.Tx) error {
			return tx.Bucket(bucketKeys).Put(key, value)
		}, []string{"bbolt panicked in go.etcd.io/bbolt", "self identifies as", "restore the journal"}},
		{"bbolt's runtime error on a damaged page", wildOffsets, func(tx *bolt.Tx) error {
			return tx.Bucket(bucketKeys).Put(key, value)
		}, []string{"bbolt panicked in go.etcd.io/bbolt", "runtime error: ", "restore the journal"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			if tc.damage != nil {
				path = damagedApplyJournal(t)
				damageFirstLeafOf(t, path, bucketKeys, tc.damage)
			}
			s, err := Open(path, WithUnsafeNoSync())
			require.NoError(t, err)
			defer s.Close()

			err = failsClosed(func() error { return s.updateDamaged(tc.fn) })
			require.ErrorIs(t, err, ErrCorrupt)
			t.Log(err)
			for _, want := range tc.says {
				require.Contains(t, err.Error(), want)
			}
			require.Equal(t, err, s.failure(), "every later call fails with the same error")
		})
	}
}

// TestReadPanicSaysWhatWasSeen: a read recovered every panic as "damaged
// page (bbolt: …)", a bug in the journal's own reading code (or in a
// caller's ForEachOpen function) included. It still fails closed, with
// ErrCorrupt, but says where the panic was raised.
func TestReadPanicSaysWhatWasSeen(t *testing.T) {
	err := failsClosed(func() error {
		return readDamaged(func() error {
			outOfRange(nil, 8)
			return nil
		})
	})
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "panic in github.com/idemkit/idem/journal.outOfRange")
	require.Contains(t, err.Error(), "outside bbolt")
	require.NotContains(t, err.Error(), "damaged page (bbolt")
}
