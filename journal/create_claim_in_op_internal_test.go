package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCreateClaimedCarriesTheClaimInItsOp: the lease CreateClaimed asks
// for rides in the create's op, not an allocation of its own, so that
// CreateClaimed allocates as Create does, and the lease granted is the one
// asked for, on the record made, its owner's and fenced as Claim's.
func TestCreateClaimedCarriesTheClaimInItsOp(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	expires := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	const runs = 200
	recs := func(prefix string) []*Record {
		rs := make([]*Record, runs+1) // AllocsPerRun's warm-up run too
		for i := range rs {
			rs[i] = ownedTestRecord(fmt.Sprint(prefix, i))
		}
		return rs
	}
	plain, claimed := recs("p"), recs("c")
	var i, j int
	create := testing.AllocsPerRun(runs, func() {
		if _, err := s.Create(ctx, plain[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	createClaimed := testing.AllocsPerRun(runs, func() {
		if _, _, err := s.CreateClaimed(ctx, claimed[j], "owner", expires); err != nil {
			t.Fatal(err)
		}
		j++
	})
	if !raceEnabled {
		require.LessOrEqual(t, createClaimed, create, "allocations per CreateClaimed, per Create")
	}

	rec, l, err := s.CreateClaimed(ctx, ownedTestRecord("k"), "owner", expires)
	require.NoError(t, err)
	require.Equal(t, "k", rec.Key)
	require.Equal(t, Lease{Scope: "s", Key: "k", Owner: "owner", Token: l.Token, Expires: expires}, l)
	require.NotZero(t, l.Token)
	_, _, err = s.Claim(ctx, "s", "k", "other", expires.Add(-time.Hour), expires)
	require.ErrorIs(t, err, ErrLeased, "another owner's claim while the lease is live")
	_, err = s.Update(WithLease(ctx, l), "s", "k", func(r *Record) error { r.Review = "x"; return nil })
	require.NoError(t, err, "a write under the lease granted")
}
