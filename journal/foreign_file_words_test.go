package journal_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// Open vets the buckets it reads (vetRootBuckets) before it reads the
// journal's magic and version. That order gives no file bbolt wrote the
// words of a damaged one: vetRootBuckets refuses only what bbolt never
// writes (an inline page out of order, an element off its page, a nested
// bucket in an inline one, which bbolt never keeps inline), so another
// program's bbolt file, with a "meta" bucket holding a nested bucket as
// bbolt users keep there, and a newer idem's journal that nests one, get
// "not an idem journal" and ErrVersion ("upgrade idem"), not a damaged
// page and a restore from a backup they do not need.
func TestForeignOrNewerFileIsNotCalledDamaged(t *testing.T) {
	nested := func(magic string, version byte) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			_, err = b.CreateBucket([]byte("a-nested-bucket"))
			return errors.Join(err, b.Put([]byte("magic"), []byte(magic)), b.Put([]byte("version"), []byte{version}))
		}
	}
	tests := []struct {
		name  string
		fill  func(tx *bolt.Tx) error
		kind  error
		words string
	}{
		{"another program's bbolt file", nested("etcd", 1), journal.ErrCorrupt, "not an idem journal"},
		{"a newer idem's journal", nested("idem-journal", journal.FormatVersion+1), journal.ErrVersion, "upgrade idem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := boltFile(t, tt.fill)
			for _, opts := range [][]journal.Option{nil, {journal.ReadOnly()}} {
				s, err := journal.Open(path, opts...)
				if err == nil {
					_ = s.Close()
				}
				require.ErrorIs(t, err, tt.kind, "Open(%v)", opts)
				require.ErrorContains(t, err, tt.words, "Open(%v)", opts)
				require.NotContains(t, err.Error(), "damaged page", "Open(%v)", opts)
			}
		})
	}
}
