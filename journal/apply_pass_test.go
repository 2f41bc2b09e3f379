package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScanAppliesOnlyWritesBeforeIt: a scan (Due, List, ForEachOpen,
// Stats), Prune and Checkpoint bring the file up to date with the writes
// acknowledged before they began, in one pass: a write published while a
// bbolt commit of theirs runs waits for the next pass. (A loop until
// nothing newer was left made every such write cost another commit, so
// that under a steady stream a scan, and the applier, never returned.)
// A write arrives here during each of the file's commits (failApply runs
// inside commitBolt; the Create stands in for another goroutine's write);
// the stream is bounded so that the test ends either way.
func TestScanAppliesOnlyWritesBeforeIt(t *testing.T) {
	ctx := context.Background()
	s, _ := rvOpen(t, WithUnsafeNoSync(), withApplyDelay(time.Hour))
	_, err := s.Create(ctx, rvRecord("before", rvT0))
	require.NoError(t, err)

	const stream = 200
	commits := 0
	s.ap.mu.Lock()
	s.ap.failApply = func() error {
		commits++
		if commits <= stream {
			if _, err := s.Create(ctx, rvRecord(fmt.Sprint("during", commits), rvT0)); err != nil {
				return err
			}
		}
		return nil
	}
	s.ap.mu.Unlock()

	_, err = s.Due(ctx, rvT0, 1)
	require.NoError(t, err)
	s.ap.mu.Lock()
	s.ap.failApply = nil
	s.ap.mu.Unlock()
	require.LessOrEqual(t, commits, 2,
		"Due waited for %d bbolt commits: it applied every write that arrived while it ran, not only the one before it", commits)
}

// TestApplyHoldsYoungOpenRecords: the applier's routine pass leaves an
// open record written within holdFor in the overlay (it will most likely
// settle, and then reach the file once), copies the others, and covers
// in the file's applied LSN only what lies below the first record it held
// back, so that a crash replays it; a scan's pass holds nothing back.
func TestApplyHoldsYoungOpenRecords(t *testing.T) {
	ctx := context.Background()
	s, path := rvOpen(t, withApplyDelay(time.Hour))
	young := rvRecord("young", rvT0)
	_, err := s.Create(ctx, young)
	require.NoError(t, err)
	settled := rvRecord("settled", rvT0)
	settled.State, settled.Settled = StateSucceeded, rvT0
	_, err = s.Create(ctx, settled)
	require.NoError(t, err)

	require.NoError(t, s.applySettled())
	require.Equal(t, 1, s.ov.len(), "the young open record held back")
	require.Nil(t, s.ov.get(recordKey("s", "settled")), "the settled one applied")
	require.Less(t, s.ap.applied, s.ov.get(recordKey("s", "young")).lsn, "the file's LSN stops below the held record")
	require.Len(t, segmentsOf(t, path), 1, "the segment holding it stays")

	// A crash now: the held record comes back from the log.
	cp := copyJournal(t, path)
	c, err := Open(cp, ReadOnly())
	require.NoError(t, err)
	got, err := c.Get(ctx, "s", "young")
	require.NoError(t, err)
	require.Equal(t, StatePending, got.State)
	require.NoError(t, c.Close())

	_, err = s.Due(ctx, rvT0, 0) // a scan applies everything
	require.NoError(t, err)
	require.Zero(t, s.ov.len())
}
