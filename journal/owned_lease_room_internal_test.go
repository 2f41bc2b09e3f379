package journal

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/owned"
	"github.com/stretchr/testify/require"
)

// The client's own Update under the context internal/owned.Lease makes
// takes its op from that context's allocation: one allocation fewer per
// write than WithLease's context marked and named (Mark, Like), which
// every operation the Client journals paid once per settle. The context
// is still the lease's (LeaseFrom, fencing), a second Update under it
// (a wrapping Store's) gets an op of its own and leaves the first
// Update's record as it was, and the context lets go of the client's
// record once its Update returns.
func TestOwnedLeaseContextHoldsItsUpdatesOp(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	rec, mine, l := createdAsTheClientSettles(t, s)

	lctx := owned.Lease(ctx, &l, mine)
	require.NotNil(t, lctx)
	got, ok := LeaseFrom(lctx)
	require.True(t, ok)
	require.Equal(t, l, got, "the lease the context carries")
	require.True(t, ownedUpdate(lctx), "marked as the client's")
	require.Same(t, mine, ownedLike(lctx), "naming the client's record")

	first, err := s.Update(lctx, "s", "k", func(r *Record) error { r.Attempts[0].Status = 201; return nil })
	require.NoError(t, err)
	c := lctx.(*leaseCtx)
	require.True(t, first == &c.room.block.r, "the record decoded into the context's room")
	require.Nil(t, c.like.Load(), "the client's earlier record, let go once the Update returned")
	second, err := s.Update(lctx, "s", "k", func(r *Record) error { r.Attempts[0].Status = 202; return nil })
	require.NoError(t, err)
	require.False(t, first == second, "a second Update's op is its own")
	require.Equal(t, 201, first.Attempts[0].Status, "the first Update's record, untouched by the second")
	require.Equal(t, 202, second.Attempts[0].Status)
	stored, err := s.Get(ctx, "s", "k")
	require.NoError(t, err)
	require.Equal(t, 202, stored.Attempts[0].Status)
	require.Equal(t, rec.Body, stored.Body)

	// Fenced as WithLease's: another owner's claim refuses the write.
	_, _, err = s.Claim(ctx, "s", "k", "other", time.Now().Add(2*time.Hour), time.Now().Add(3*time.Hour))
	require.NoError(t, err)
	called := false
	_, err = s.Update(owned.Lease(ctx, &l, stored), "s", "k", func(*Record) error { called = true; return nil })
	require.ErrorIs(t, err, ErrLeaseLost)
	require.False(t, called, "fn under a lost lease")
}

// The allocations of the client's write: owned.Lease's context and the
// Update under it, against WithLease's marked and named.
func TestOwnedLeaseContextAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the detector's instrumentation allocates")
	}
	ctx := context.Background()
	s := ownedTestStore(t)
	_, mine, l := createdAsTheClientSettles(t, s)
	s.ap.delay = time.Hour // the applier's allocations are not the write's
	write := func(lctx context.Context) {
		if _, err := s.Update(lctx, "s", "k", func(r *Record) error { r.Attempts[0].Status++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	plain := testing.AllocsPerRun(100, func() {
		lctx := WithLease(ctx, l)
		owned.Mark(lctx)
		owned.Like(lctx, mine)
		write(lctx)
	})
	roomed := testing.AllocsPerRun(100, func() { write(owned.Lease(ctx, &l, mine)) })
	require.Equal(t, plain-1, roomed, "allocations per write: owned.Lease's context, against WithLease's (%v)", plain)
}

// createdAsTheClientSettles creates record "k" as the client has it when
// it settles (one attempt, a header of one value), claimed by "owner":
// the record given, the one stored, and the lease.
func createdAsTheClientSettles(t *testing.T, s *Store) (rec, stored *Record, l Lease) {
	t.Helper()
	rec = ownedUpdateRecord("k", 1024)
	rec.Header = http.Header{"Content-Type": {"application/json"}}
	rec.Attempts = []Attempt{{Number: 1, Kind: AttemptSubmit, Start: rec.Created}}
	stored, l, err := s.CreateClaimed(context.Background(), rec, "owner", time.Now().Add(time.Hour))
	require.NoError(t, err)
	return rec, stored, l
}

// A Store wrapping the bbolt journal (a mirror) may pass the client's
// context to two Updates at once: one takes the context's room, the other
// allocates its own op, each hands back its own record, both writes are
// committed, and the context lets go of the client's record (a data race
// while that was a plain field: run under -race).
func TestOwnedLeaseContextTwoUpdatesAtOnce(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	_, mine, l := createdAsTheClientSettles(t, s)
	for range 20 {
		lctx := owned.Lease(ctx, &l, mine)
		c := lctx.(*leaseCtx)
		var wg sync.WaitGroup
		got := make([]*Record, 2)
		errs := make([]error, 2)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = s.Update(lctx, "s", "k", func(r *Record) error { r.Attempts[0].Status++; return nil })
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.False(t, got[0] == got[1], "each Update's record its own")
		room := &c.room.block.r
		require.True(t, (got[0] == room) != (got[1] == room), "exactly one Update took the context's room")
		require.Nil(t, c.like.Load(), "the client's record, let go")
	}
	stored, err := s.Get(ctx, "s", "k")
	require.NoError(t, err)
	require.Equal(t, 40, stored.Attempts[0].Status, "every write committed")
}
