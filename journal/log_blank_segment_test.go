package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestZeroHeaderSegmentDeletesUnappliedSegment: a segment without a header
// (a crash while it was created) voids nothing; the segment before it
// counts as applied only as far as the file holds it.
func TestZeroHeaderSegmentDeletesUnappliedSegment(t *testing.T) {
	path := crashedJournal(t, createKeys(t, 5))
	segs := segmentsOf(t, path)
	require.Len(t, segs, 1)
	dir, base := logLocation(path)
	// A crash while the next segment was being created: its name is
	// there, its header is not (the case TestLogDamage accepts).
	require.NoError(t, os.WriteFile(segmentPath(dir, base, 0x20), nil, 0o600))

	id := readID(t, path)
	st, err := scanLog(dir, base, id, 0)
	require.NoError(t, err)
	require.Len(t, st.entries, 5)

	// What openLog does, then one round, then the applier having
	// applied the first two of the five logged writes (a batch cut at
	// applyBatch, say) and deleting what that covers.
	w := &logWriter{dir: dir, base: base, id: id, noSync: true, next: st.next, gen: st.maxGen, segments: st.segments, maxSize: segmentSize}
	_, err = w.append([][]byte{encode(nil, rvRecord("new", rvT0))})
	require.NoError(t, err)
	w.close()
	require.NoError(t, w.deleteApplied(2, false))

	require.FileExists(t, segs[0], "the segment holding writes 3..5, which the file lacks, was deleted")
	_, err = scanLog(dir, base, id, 2)
	require.NoError(t, err, "the log after the applier deleted what it had applied")
}

// TestZeroHeaderSegmentLosesAcknowledgedWrites is the same end to end: a
// crashed process left more than applyBatch records in its log and a
// segment without a header; the next process's applier commits a first
// batch, and its second fails (a record of the file it must replace does
// not decode; a full disk or EIO does the same, as does a crash between
// the two commits). After the next restart every acknowledged write is
// there.
func TestZeroHeaderSegmentLosesAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes applyBatch records")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	n := applyBatch + 300
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%06d", i)
	}

	// Process 1: "bad" is in the file; then n records only in the log
	// (the applier fails: stands in for a process killed before its
	// applier ran), then an update of "bad", the log's last write.
	s, err := Open(path, WithUnsafeNoSync(), withApplyDelay(time.Hour))
	require.NoError(t, err)
	_, err = s.Create(ctx, rvRecord("bad", rvT0))
	require.NoError(t, err)
	require.NoError(t, s.applyAll())
	s.ap.mu.Lock()
	s.ap.failApply = func() error { return errInjected }
	s.ap.mu.Unlock()
	var wg sync.WaitGroup
	const workers = 16
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, err := s.Create(ctx, rvRecord(keys[i], rvT0)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	_, err = s.Update(ctx, "s", "bad", func(r *Record) error { r.Review = "x"; return nil })
	require.NoError(t, err)
	s.crash(t)
	segs := segmentsOf(t, path)
	require.Len(t, segs, 1)

	// The crash also left the next segment's name without its header.
	dir, base := logLocation(path)
	require.NoError(t, os.WriteFile(segmentPath(dir, base, 0x20), nil, 0o600))
	// "bad" in the file cannot be replaced: the applier's second batch
	// (the one holding bad's update, the log's last write) fails.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		sk := tx.Bucket(bucketKeys).Get(recordKey("s", "bad"))
		require.NotNil(t, sk)
		return tx.Bucket(bucketOpen).Put(sk, []byte{0xde, 0xad})
	}))
	require.NoError(t, db.Close())

	// Process 2: opens, its applier applies a first batch and fails the
	// second (Checkpoint makes sure one apply has run to its end).
	s2, err := Open(path, WithUnsafeNoSync())
	require.NoError(t, err)
	require.Equal(t, n+1, s2.ov.len(), "process 2 read every logged write back")
	require.Error(t, s2.Checkpoint(ctx), "the second batch fails")
	s2.crash(t)

	// Process 3: every record process 1 acknowledged is still there.
	s3, err := Open(path, WithUnsafeNoSync(), withApplyDelay(time.Hour))
	require.NoError(t, err)
	defer s3.Close()
	missing := 0
	for _, k := range keys {
		if _, err := s3.Get(ctx, "s", k); err != nil {
			missing++
		}
	}
	require.Zero(t, missing, "acknowledged Creates lost (of %d); log segments left: %v", n, segmentsOf(t, path))
}
