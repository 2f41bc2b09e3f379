package journal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/journal"
)

// TestOpenReadsFilesOfAnyPageSize: bbolt keeps a file's page size in its
// meta page, so a journal written where the OS page is 16 KiB (arm64
// macOS) or 64 KiB (some arm64 and ppc64 Linux kernels) is opened here at
// that page size, and the checks Open runs on the file's mapping
// (vetRootBuckets among them) must read its pages at that size: a healthy
// journal of another page size, its buckets inline or not (the same
// records leave only meta inline at 1 KiB, all but done.seq at 64 KiB),
// opens for writing and read-only, checks out, and compacts.
func TestOpenReadsFilesOfAnyPageSize(t *testing.T) {
	for _, ps := range []int{1 << 10, 16 << 10, 64 << 10} {
		t.Run(fmt.Sprint(ps), func(t *testing.T) {
			path := settledJournalOfPageSize(t, 300, ps)
			db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
			require.NoError(t, err)
			require.Equal(t, ps, db.Info().PageSize, "bbolt kept the file's page size")
			inline := map[string]bool{}
			require.NoError(t, db.View(func(tx *bolt.Tx) error {
				return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
					inline[string(name)] = b.Root() == 0
					return nil
				})
			}))
			// The keys bucket is read first by every Create and Get.
			require.Equal(t, ps == 64<<10, inline["keys"], "keys bucket inline at %d-byte pages", ps)
			require.NoError(t, db.Close())

			for _, opts := range [][]journal.Option{nil, {journal.ReadOnly()}} {
				s, err := journal.Open(path, opts...)
				require.NoError(t, err)
				recs, err := s.List(context.Background(), journal.Filter{})
				require.NoError(t, err)
				require.Len(t, recs, 300)
				require.NoError(t, s.Close())
			}
			require.NoError(t, journal.Check(path))
			_, err = journal.Compact(path)
			require.NoError(t, err)
			require.NoError(t, journal.Check(path))
		})
	}
}
