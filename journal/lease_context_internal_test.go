package journal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type otherKey struct{}

// leaseSink keeps WithLease's context on the heap, as a write's is.
var leaseSink context.Context

// TestWithLeaseCarriesTheLeaseAsWithValueDid: WithLease's context is one
// allocation (context.WithValue's two before: the context and the boxed
// Lease) and answers as WithValue's did: LeaseFrom finds the lease on it,
// on a context derived from it, and the innermost of two; other values,
// the deadline, Done and cancellation pass through from its parent, and a
// context derived from it is cancelled with that parent.
func TestWithLeaseCarriesTheLeaseAsWithValueDid(t *testing.T) {
	l := Lease{Scope: "s", Key: "k", Owner: "o", Token: 7, Expires: time.Unix(1700000000, 0)}
	parent, cancel := context.WithDeadline(context.WithValue(context.Background(), otherKey{}, "v"), time.Now().Add(time.Hour))
	defer cancel()
	if !raceEnabled {
		allocs := testing.AllocsPerRun(100, func() { leaseSink = WithLease(parent, l) })
		require.Equal(t, 1.0, allocs, "allocations per WithLease")
	}
	ctx := WithLease(parent, l)
	got, ok := LeaseFrom(ctx)
	require.True(t, ok)
	require.Equal(t, l, got)
	require.Equal(t, l, ctx.Value(leaseKey{}), "Value of the lease's key")
	require.Equal(t, "v", ctx.Value(otherKey{}), "another value")
	want, _ := parent.Deadline()
	d, ok := ctx.Deadline()
	require.True(t, ok)
	require.Equal(t, want, d)

	child, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	got, ok = LeaseFrom(child)
	require.True(t, ok, "a derived context")
	require.Equal(t, l, got)
	inner := l
	inner.Token = 8
	got, ok = LeaseFrom(WithLease(child, inner))
	require.True(t, ok)
	require.Equal(t, inner, got, "the innermost lease")
	_, ok = LeaseFrom(parent)
	require.False(t, ok, "no lease")

	cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the derived context was not cancelled with the lease's parent")
	}
	require.ErrorIs(t, ctx.Err(), context.Canceled)
	var none context.Context // nil on purpose: WithLease panics on it, as context.WithValue does
	require.Panics(t, func() { WithLease(none, l) })
}
