package journal_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// bucketPages returns, for the bucket named bucket of the journal at path
// (which no Store holds), the page size and the file offsets of its root
// page and of its first leaf.
func bucketPages(t *testing.T, path, bucket string) (pageSize, root, leaf int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	var id uint64
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		id = uint64(tx.Bucket([]byte(bucket)).Root())
		pageSize = tx.DB().Info().PageSize
		return nil
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, id, "the %s bucket is inline: write more records", bucket)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	root = int(id) * pageSize
	leaf = root
	for binary.LittleEndian.Uint16(data[leaf+8:leaf+10])&0x01 != 0 { // branch: go to the first child
		leaf = int(binary.LittleEndian.Uint64(data[leaf+16+8:leaf+16+16])) * pageSize
	}
	return pageSize, root, leaf
}

// bboltKeys returns the keys bbolt's own cursor shows in the bucket named
// bucket of the journal at path, in its order.
func bboltKeys(t *testing.T, path, bucket string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	var keys []string
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	}))
	return keys
}

// missing returns the keys of want that got lacks, and got's length.
func missing(want, got []string) string {
	var out []string
	for _, k := range want {
		if _, ok := slices.BinarySearch(got, k); !ok {
			out = append(out, k)
		}
	}
	return fmt.Sprintf("%d records, %d of %d missing: %.60v", len(got), len(out), len(want), out)
}

// hidingDamage is damage to one page of a bucket that leaves the page
// looking sound to bbolt, which then walks past some of its entries
// without a word: no panic, no fault, no error.
type hidingDamage struct {
	name   string
	bucket string
	branch bool // damage the root (a branch), not the first leaf
	damage func(p []byte)
}

// hidingDamages are the damages a scan must notice. A count is two bytes
// of a page header; a child's page id eight bytes of a branch element: a
// bad sector or a stray write that changes them leaves every other byte
// of the page as it was.
func hidingDamages() []hidingDamage {
	lowerCount := func(p []byte) {
		n := binary.LittleEndian.Uint16(p[10:12])
		binary.LittleEndian.PutUint16(p[10:12], n-max(1, n/2))
	}
	var out []hidingDamage
	for _, bucket := range []string{"due.seq", "open.seq", "keys"} {
		out = append(out, hidingDamage{"leaf count lowered", bucket, false, lowerCount})
	}
	out = append(out,
		hidingDamage{"branch count lowered", "due.seq", true, lowerCount},
		// The first child's page id made the second's: the first child's
		// entries are never reached, the second's read twice.
		hidingDamage{"branch child sent to its sibling", "due.seq", true, func(p []byte) {
			copy(p[16+8:16+16], p[32+8:32+16])
		}},
		// The first entry's key made the second's: the due index names
		// the second record twice and the first not at all.
		hidingDamage{"due key made its neighbour's", "due.seq", false, func(p []byte) {
			pos0 := 16 + int(binary.LittleEndian.Uint32(p[16+4:16+8]))
			pos1 := 32 + int(binary.LittleEndian.Uint32(p[32+4:32+8]))
			copy(p[pos0:pos0+16], p[pos1:pos1+16])
		}},
	)
	return out
}

// TestDamagedPageHidesNoOpenRecord: promise 10, and a lost operation. A
// damaged page of the due index, the open records or the key index that
// still looks sound to bbolt (a lowered element count, a branch's child
// sent to a sibling, a key made its neighbour's) made bbolt's cursor walk
// past entries: Due, ClaimDue and ForEachOpen (what Resume and Run read),
// List and Stats answered without some records, and without an error. An
// operation in flight that Resume never visits is never settled. Every
// scan must either answer in full or fail with ErrCorrupt.
func TestDamagedPageHidesNoOpenRecord(t *testing.T) {
	const n = 3000 // every tenth open: k00000, k00010, …
	var open, all []string
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		all = append(all, k)
		if i%10 == 0 {
			open = append(open, k)
		}
	}
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	keysOf := func(recs []*journal.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Key)
		}
		slices.Sort(out)
		return out
	}
	scans := []struct {
		name string
		want []string
		fn   func(s *journal.Store) ([]string, error)
	}{
		{"Due", open, func(s *journal.Store) ([]string, error) {
			recs, err := s.Due(context.Background(), far, 0)
			return keysOf(recs), err
		}},
		{"ClaimDue", open, func(s *journal.Store) ([]string, error) {
			cl, err := s.ClaimDue(context.Background(), "me", far, far.Add(time.Hour), 0)
			var recs []*journal.Record
			for _, c := range cl {
				recs = append(recs, c.Record)
			}
			return keysOf(recs), err
		}},
		{"ForEachOpen", open, func(s *journal.Store) ([]string, error) {
			var recs []*journal.Record
			err := s.ForEachOpen(context.Background(), func(r *journal.Record) error {
				recs = append(recs, r)
				return nil
			})
			return keysOf(recs), err
		}},
		{"List(open)", open, func(s *journal.Store) ([]string, error) {
			recs, err := s.List(context.Background(), journal.Filter{Open: true})
			return keysOf(recs), err
		}},
		{"List(all)", all, func(s *journal.Store) ([]string, error) {
			recs, err := s.List(context.Background(), journal.Filter{})
			return keysOf(recs), err
		}},
	}
	for _, d := range hidingDamages() {
		t.Run(d.bucket+"/"+d.name, func(t *testing.T) {
			path := settledJournal(t, n)
			before := bboltKeys(t, path, d.bucket)
			pageSize, root, leaf := bucketPages(t, path, d.bucket)
			off := leaf
			if d.branch {
				require.NotEqual(t, root, leaf, "the %s bucket has no branch page: write more records", d.bucket)
				off = root
			}
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			d.damage(data[off : off+pageSize])
			require.NoError(t, os.WriteFile(path, data, 0o600))
			// The damage is of the kind this test is about: bbolt's own
			// walk shows other entries than the bucket holds, and says
			// nothing.
			require.NotEqual(t, before, bboltKeys(t, path, d.bucket), "the entries bbolt's cursor shows in %s", d.bucket)

			for _, ro := range []bool{false, true} {
				var opts []journal.Option
				if ro {
					opts = append(opts, journal.ReadOnly())
				}
				s, err := journal.Open(path, opts...)
				require.NoError(t, err)
				for _, sc := range scans {
					got, err := sc.fn(s)
					if err == nil {
						if !slices.Equal(sc.want, got) {
							t.Fatalf("%s (read-only %v) answered without an error, not in full: %s", sc.name, ro, missing(sc.want, got))
						}
						continue
					}
					require.ErrorIs(t, err, journal.ErrCorrupt, "%s (read-only %v)", sc.name, ro)
				}
				st, err := s.Stats(context.Background())
				if err == nil {
					require.Equal(t, [2]int{len(open), n}, [2]int{st.Open, st.Total}, "Stats (read-only %v): open and total records", ro)
				} else {
					require.ErrorIs(t, err, journal.ErrCorrupt, "Stats (read-only %v)", ro)
				}
				require.NoError(t, s.Close())
			}
		})
	}
}
