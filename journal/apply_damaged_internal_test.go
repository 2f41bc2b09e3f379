package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// damagedApplyJournal writes a journal of 3000 records, every tenth open
// (k00000, k00010, …), the others settled, all in the file, and closes it.
func damagedApplyJournal(t *testing.T) string {
	return journalOf(t, 3000, func(i int) (time.Time, bool) { return rvT0, i%10 != 0 })
}

// journalOf writes a journal of n records k00000, k00001, …, each settled
// at the time settled gives unless it says to leave the record open, all
// in the file, and closes it.
func journalOf(t *testing.T, n int, settled func(i int) (at time.Time, ok bool)) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	for i := range n {
		key := fmt.Sprintf("k%05d", i)
		_, err := s.Create(ctx, rvRecord(key, rvT0))
		require.NoError(t, err)
		if at, ok := settled(i); ok {
			_, err = s.Update(ctx, "s", key, func(r *Record) error {
				r.State, r.Settled, r.Updated = StateSucceeded, at, at
				return nil
			})
			require.NoError(t, err)
		}
	}
	require.NoError(t, s.Close())
	return path
}

// bucketRoot returns the root page of the bucket named bucket of the
// journal at path (which nothing holds), not inline, and the page size.
func bucketRoot(t *testing.T, path string, bucket []byte) (root uint64, ps int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root, ps = uint64(tx.Bucket(bucket).Root()), tx.DB().Info().PageSize
		return nil
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, root, "bucket %s is inline", bucket)
	return root, ps
}

// leavesOf reads the journal at path (which nothing holds) and returns
// its bytes and the i-th leaf page under the root of the bucket named
// bucket, a branch: a slice of those bytes, to damage before writing them
// back.
func leavesOf(t *testing.T, path string, bucket []byte) (data []byte, leaf func(i int) []byte) {
	t.Helper()
	root, ps := bucketRoot(t, path, bucket)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	rp := data[int(root)*ps:]
	require.Equal(t, uint16(branchPageFlag), binary.LittleEndian.Uint16(rp[8:10]), "bucket %s's root is a branch", bucket)
	return data, func(i int) []byte {
		id := binary.LittleEndian.Uint64(rp[16+16*i+8:])
		return data[int(id)*ps : int(id+1)*ps]
	}
}

// damageFirstLeafOf rewrites, in the journal at path (which nothing
// holds), the first leaf of the bucket named bucket with damage(page), or
// when damage is nil makes every key on it one zero byte of the file's
// unused tail, so that bbolt's search misses every key the page holds,
// without a fault (see keyPageDamages).
func damageFirstLeafOf(t *testing.T, path string, bucket []byte, damage func(page []byte)) {
	t.Helper()
	root, ps := bucketRoot(t, path, bucket)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	off := int(root) * ps
	for binary.LittleEndian.Uint16(data[off+8:off+10]) == branchPageFlag {
		off = int(binary.LittleEndian.Uint64(data[off+16+8:off+16+16])) * ps
	}
	// A page of zeros past the end, as bbolt grows a file.
	tail := len(data)
	data = append(data, make([]byte, ps)...)
	p := data[off : off+ps]
	if damage != nil {
		damage(p)
	} else {
		for i := range int(binary.LittleEndian.Uint16(p[10:12])) {
			e := 16 + 16*i
			binary.LittleEndian.PutUint32(p[e+4:e+8], uint32(tail-off-e))
			binary.LittleEndian.PutUint32(p[e+8:e+12], 1)
			binary.LittleEndian.PutUint32(p[e+12:e+16], 8)
		}
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// TestApplyOnDamagedPage: the worst bugs there are. The applier copies
// the log into the file in a write transaction, which read and changed
// pages unchecked (vetMiss checks the misses of read transactions). When
// the journal was opened after a crash:
//   - a logged update of an operation whose key entry lay on a damaged
//     page of the key index met bbolt's miss: the applier took the
//     operation for a new one and gave it a second record, and wrote the
//     page back with every key on it made one zero byte, damage no check
//     could tell from data any more;
//   - a logged update that moved an operation's due time deleted its due
//     entry from a page of the due index whose element count a bad block
//     had lowered: bbolt wrote the page back as it read it, a sound page
//     without the entries the count no longer covered, and those open
//     operations were gone from every scan for good.
//
// The apply must fail with ErrCorrupt, write nothing, and leave the write
// in the log.
func TestApplyOnDamagedPage(t *testing.T) {
	cases := []struct {
		name   string
		bucket []byte
		damage func(page []byte)
		update func(r *Record)
	}{
		{"key index, keys off the page", bucketKeys, nil, func(r *Record) { r.Review = "logged, not applied" }},
		{"due index, count lowered", bucketDue, func(p []byte) {
			binary.LittleEndian.PutUint16(p[10:12], binary.LittleEndian.Uint16(p[10:12])/2)
		}, func(r *Record) { r.NextDue = rvT0.Add(time.Hour) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := damagedApplyJournal(t)

			// A process updates an open operation (k00000, on the
			// first leaf of both indexes), then dies before the
			// applier copies the update into the file.
			s, err := Open(path, WithUnsafeNoSync(), withApplyDelay(time.Hour))
			require.NoError(t, err)
			want, err := s.Update(ctx, "s", "k00000", func(r *Record) error {
				tc.update(r)
				return nil
			})
			require.NoError(t, err)
			s.crash(t)

			damageFirstLeafOf(t, path, tc.bucket, tc.damage)
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			s, err = Open(path, WithUnsafeNoSync(), withApplyDelay(time.Hour))
			require.NoError(t, err)
			err = failsClosed(func() error { return s.Checkpoint(ctx) })
			require.ErrorIs(t, err, ErrCorrupt, "applying the logged update")
			_ = s.Close() // applies again, and fails again
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "the damaged journal was written")

			// The update is still in the log.
			s, err = Open(path, ReadOnly())
			require.NoError(t, err)
			got, err := s.Get(ctx, "s", "k00000")
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.NoError(t, s.Close())
		})
	}
}

// failsClosed runs fn and turns a panic into an error.
func failsClosed(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn()
}

// TestApplyMergeWithDamagedSibling: bbolt merges a page that deletions
// left small with the page beside it (node.rebalance), reading that page
// as it is and writing the merge back as a sound page. Settling every
// open operation on the due index's first leaf but one, when a bad block
// had lowered the second leaf's element count, made the apply merge the
// entries that count still covered into the first leaf and lose the
// others for good. The apply must fail with ErrCorrupt and write nothing.
func TestApplyMergeWithDamagedSibling(t *testing.T) {
	ctx := context.Background()
	path := damagedApplyJournal(t)
	data, leaf := leavesOf(t, path, bucketDue)
	first := int(binary.LittleEndian.Uint16(leaf(0)[10:12]))

	s, err := Open(path, WithUnsafeNoSync(), withApplyDelay(time.Hour))
	require.NoError(t, err)
	for i := 1; i < first; i++ { // the first leaf's records: k00000, k00010, …
		_, err := s.Update(ctx, "s", fmt.Sprintf("k%05d", 10*i), func(r *Record) error {
			r.State, r.Settled, r.Updated = StateSucceeded, rvT0, rvT0
			return nil
		})
		require.NoError(t, err)
	}
	s.crash(t)

	second := leaf(1)
	binary.LittleEndian.PutUint16(second[10:12], binary.LittleEndian.Uint16(second[10:12])/2)
	require.NoError(t, os.WriteFile(path, data, 0o600))

	s, err = Open(path, WithUnsafeNoSync(), withApplyDelay(time.Hour))
	require.NoError(t, err)
	err = failsClosed(func() error { return s.Checkpoint(ctx) })
	require.ErrorIs(t, err, ErrCorrupt, "applying deletions next to a damaged page")
	_ = s.Close()
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, after), "the damaged journal was written")
}

// TestPruneMergeWithDamagedSibling: Prune's deletions make bbolt merge
// the settled index's first leaf, left with one entry, with the leaf
// beside it, read as it is. When a bad block had lowered that leaf's
// element count, the prune wrote the merge back as a sound page and lost
// the entries the count no longer covered: their records were never
// pruned again, and the file held damage no check could tell from data.
// The prune must fail with ErrCorrupt and write nothing.
func TestPruneMergeWithDamagedSibling(t *testing.T) {
	ctx := context.Background()
	path := journalOf(t, 3000, func(i int) (time.Time, bool) { return rvT0.Add(time.Duration(i+1) * time.Second), true })

	data, leaf := leavesOf(t, path, bucketSettled)
	first := int(binary.LittleEndian.Uint16(leaf(0)[10:12]))
	second := leaf(1)
	binary.LittleEndian.PutUint16(second[10:12], binary.LittleEndian.Uint16(second[10:12])/2)
	require.NoError(t, os.WriteFile(path, data, 0o600))

	s, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	// Every record of the first leaf but its last: settled at 1 s … first-1 s.
	var n int
	err = failsClosed(func() (err error) {
		n, err = s.Prune(ctx, rvT0.Add(time.Duration(first-1)*time.Second+time.Millisecond))
		return err
	})
	require.ErrorIs(t, err, ErrCorrupt, "pruning beside a damaged page (%d pruned)", n)
	_ = s.Close()
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, after), "the damaged journal was written")
}
