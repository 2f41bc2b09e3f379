package journal

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCreateClaimed: the record comes back leased to its creator, as Claim
// would lease it; a key that exists is neither written nor leased, and its
// live lease is left alone; a key with a live lease is created without
// one, for the caller to Claim.
func TestCreateClaimed(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	rec := rvRecord("a", rvT0)
	got, l, err := s.CreateClaimed(ctx, rec, "me", rvT0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "me", l.Owner)
	require.NotZero(t, l.Token)
	require.Equal(t, rec.Key, got.Key)
	claimed, err := s.ClaimDue(ctx, "other", rvT0.Add(time.Second), rvT0.Add(time.Minute), 0)
	require.NoError(t, err)
	require.Empty(t, claimed, "ClaimDue took a record its creator holds")
	_, err = s.Update(WithLease(ctx, l), "s", "a", func(r *Record) error { r.Review = "x"; return nil })
	require.NoError(t, err, "a write under the creator's lease")

	_, l2, err := s.CreateClaimed(ctx, rvRecord("a", rvT0), "me", rvT0.Add(time.Minute))
	require.ErrorIs(t, err, ErrExists)
	require.Zero(t, l2)
	_, err = s.Update(WithLease(ctx, l), "s", "a", func(r *Record) error { r.Review = "y"; return nil })
	require.NoError(t, err, "the first lease still holds")

	// A live lease on a key that has no record: Created without a lease.
	_, err = s.leases.claim("s", "b", "someone", rvT0, rvT0.Add(time.Hour), false)
	require.NoError(t, err)
	_, l3, err := s.CreateClaimed(ctx, rvRecord("b", rvT0), "me", rvT0.Add(time.Minute))
	require.NoError(t, err)
	require.Zero(t, l3, "no lease over someone else's live one")
	_, err = s.Get(ctx, "s", "b")
	require.NoError(t, err)

	_, _, err = s.CreateClaimed(ctx, rvRecord("c", rvT0), "", rvT0.Add(time.Minute))
	require.ErrorIs(t, err, ErrInvalid, "an empty owner")
}

// TestCreateClaimedRacesClaimDue: a record due at once, created with its
// lease while Run's ClaimDue polls: never both hold a lease on it.
func TestCreateClaimedRacesClaimDue(t *testing.T) {
	s, _ := rvOpen(t, WithUnsafeNoSync())
	ctx := context.Background()
	for i := range 200 {
		key := "k" + string(rune('A'+i%26)) + time.Duration(i).String()
		var wg sync.WaitGroup
		var created Lease
		var runs []Claimed
		wg.Go(func() {
			var err error
			_, created, err = s.CreateClaimed(ctx, rvRecord(key, rvT0), "caller", rvT0.Add(time.Minute))
			require.NoError(t, err)
		})
		wg.Go(func() {
			for range 3 {
				c, err := s.ClaimDue(ctx, "run", rvT0.Add(30*time.Second), rvT0.Add(time.Minute), 0)
				require.NoError(t, err)
				runs = append(runs, c...)
			}
		})
		wg.Wait()
		require.NotZero(t, created.Token, "%s: the creator's lease", key)
		for _, c := range runs {
			require.NotEqual(t, key, c.Record.Key, "%s: Run claimed a record its creator holds", key)
		}
		require.NoError(t, s.Release(ctx, created))
		_, err := s.Update(ctx, "s", key, func(r *Record) error {
			r.State, r.Settled = StateSucceeded, rvT0
			return nil
		})
		require.NoError(t, err)
	}
}
