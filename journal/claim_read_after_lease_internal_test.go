package journal

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClaimReadsTheRecordItLeases: Claim read the record, then took the
// lease. A holder that wrote the record between the two (two Clients
// sharing one Store; its lease expired, its write still fenced only by
// its token) handed the lease over with the record as it was before that
// write: the new holder drove the operation from a state the journal no
// longer held (an attempt it did not know was sent, a NextDue already
// moved on). A Claim that gets the lease must return the record as it is
// under that lease: taken first, the lease fences the old holder's write.
func TestClaimReadsTheRecordItLeases(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "j.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Create(ctx, newRecord("a"))
	require.NoError(t, err)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	_, la, err := s.Claim(ctx, "s", "a", "A", now, now.Add(time.Minute))
	require.NoError(t, err)

	// A, its lease expired but still at work, writes as B claims.
	s.claimStep = func() {
		s.claimStep = nil
		_, err := s.Update(WithLease(ctx, la), "s", "a", func(r *Record) error {
			r.NextDue = now.Add(time.Hour)
			return nil
		})
		if !errors.Is(err, ErrLeaseLost) { // lost: B's lease fenced it
			require.NoError(t, err)
		}
	}
	later := now.Add(2 * time.Minute)
	r, lb, err := s.Claim(ctx, "s", "a", "B", later, later.Add(time.Minute))
	require.NoError(t, err)
	require.Nil(t, s.claimStep, "the step between lease and read ran")
	require.NotZero(t, lb.Token)
	got, err := s.Get(ctx, "s", "a")
	require.NoError(t, err)
	require.True(t, r.NextDue.Equal(got.NextDue), "B's lease came with the record as it was before A's last write (NextDue %s; the journal holds %s)", r.NextDue, got.NextDue)
}
