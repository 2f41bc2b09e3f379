package journal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUpdateFencedInsideItsCommit: a write under a lease that another
// owner takes over while the write waits for its commit is refused in the
// commit (ErrLeaseLost), without calling fn or writing anything; Update
// checks its lease there itself, not through a wrapper of fn. A lease
// lost before the write is queued is refused at once, just the same.
func TestUpdateFencedInsideItsCommit(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	_, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)
	_, mine, err := s.Claim(ctx, "s", "x", "me", rvT0, rvT0.Add(time.Minute))
	require.NoError(t, err)

	release, wait := rvBlock(t, s)
	called := false
	write := rvGo(func() (*Record, error) {
		return s.Update(WithLease(ctx, mine), "s", "x", func(r *Record) error {
			called = true
			r.Review = "written under a lost lease"
			return nil
		})
	})
	rvWaitQueued(t, s, 1) // past its first check, waiting for the commit
	later := rvT0.Add(time.Hour)
	_, theirs, err := s.Claim(ctx, "s", "x", "them", later, later.Add(time.Minute))
	require.NoError(t, err, "takeover Claim()")
	release()
	require.NoError(t, wait())

	res := <-write
	require.ErrorIs(t, res.err, ErrLeaseLost, "Update() under a lease taken over while it waited")
	require.False(t, called, "fn called under a lost lease")
	x, err := s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Empty(t, x.Review, "written under a lost lease")

	called = false
	_, err = s.Update(WithLease(ctx, mine), "s", "x", func(*Record) error { called = true; return nil })
	require.ErrorIs(t, err, ErrLeaseLost, "Update() under a lease already lost")
	require.False(t, called, "fn called under a lease already lost")
	_, err = s.Update(WithLease(ctx, theirs), "s", "x", func(r *Record) error { r.Review = "theirs"; return nil })
	require.NoError(t, err, "Update() under the current lease")
}
