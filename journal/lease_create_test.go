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
// live lease is left alone; a lease left on a key without a record is
// replaced.
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

	// A live lease on a key that has no record (its record was pruned
	// under it): stale; the creator's replaces it and fences its holder.
	stale, err := s.leases.claim("s", "b", "someone", rvT0, rvT0.Add(time.Hour), false)
	require.NoError(t, err)
	_, l3, err := s.CreateClaimed(ctx, rvRecord("b", rvT0), "me", rvT0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, "me", l3.Owner)
	require.Greater(t, l3.Token, stale.Token)
	_, err = s.Renew(ctx, stale, rvT0.Add(2*time.Hour))
	require.ErrorIs(t, err, ErrLeaseLost, "the stale holder is fenced")

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

// TestCreateClaimedExistsLeavesLeaseAlone: CreateClaimed of a key that
// exists writes and leases nothing: a lease whose time ran out but that
// nobody claimed (its holder still driving the operation: fenced writes
// compare tokens only) is left as it is, and nobody else is told
// ErrLeased meanwhile.
func TestCreateClaimedExistsLeavesLeaseAlone(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("a", rvT0))
	require.NoError(t, err)
	_, holder, err := s.Claim(ctx, "s", "a", "run", rvT0, rvT0.Add(time.Minute))
	require.NoError(t, err)
	_, err = s.Update(WithLease(ctx, holder), "s", "a", func(r *Record) error { r.Ref = "1"; return nil })
	require.NoError(t, err, "a write under the lease, before it runs out")

	// Later, another caller submits the same caller-chosen key.
	late := rvRecord("a", rvT0.Add(2*time.Minute))
	late.Created = rvT0.Add(2 * time.Minute)
	_, l, err := s.CreateClaimed(ctx, late, "caller", late.Created.Add(time.Minute))
	require.ErrorIs(t, err, ErrExists)
	require.Zero(t, l)

	_, err = s.Update(WithLease(ctx, holder), "s", "a", func(r *Record) error { r.Ref = "2"; return nil })
	require.NoError(t, err, "nobody claimed the record, yet a CreateClaimed that leased nothing fenced its holder")
}
