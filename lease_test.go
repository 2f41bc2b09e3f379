package idem_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestLeaseLostStopsTheDriver: another owner claims the operation while
// this call waits out a Retry-After; the call's next write is refused and
// it stops at once: no further request, no write, ErrUnknownOutcome.
func TestLeaseLostStopsTheDriver(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Throttle, Key: "k", RetryAfter: 5 * time.Second}))
	var takenOver journal.Lease
	clk := &sleepHookClock{Clock: e.clock, fn: func() {
		// Far in the future for this lease holder: "b" treats it as expired.
		now := e.clock.Now().Add(time.Hour)
		var err error
		_, takenOver, err = e.store.Claim(e.ctx, idem.DefaultScope, "k", "replica-b", now, now.Add(time.Minute))
		require.NoError(t, err, "takeover Claim()")
	}}
	c, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithClock(clk), idem.WithLease("replica-a", time.Second))...)
	require.NoError(t, err)
	defer c.Close()

	res, err := c.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() after losing the lease")
	require.ErrorIs(t, err, journal.ErrLeaseLost)
	require.NotNil(t, res)
	require.NotZero(t, takenOver.Token, "the takeover happened")
	require.Len(t, e.submits("k"), 1, "submits: the throttled one only, none after the takeover")
	rec := e.record("k")
	require.Len(t, rec.Attempts, 1, "attempts journaled: none after the takeover")
	require.False(t, rec.State.Terminal(), "state %s", rec.State)

	// The new owner drives it to the end.
	_, err = e.store.Update(journal.WithLease(e.ctx, takenOver), idem.DefaultScope, "k", func(r *journal.Record) error {
		r.Review = "taken over"
		return nil
	})
	require.NoError(t, err, "the new owner's write")
}

// TestForeignLease: a caller whose operation another owner drives sends
// nothing while that owner's lease lives: it polls within its budget and
// takes the operation over once the lease expires, or, when the budget
// ends first, reports the outcome unknown (journal.ErrLeased).
func TestForeignLease(t *testing.T) {
	tests := []struct {
		name     string
		lease    time.Duration // the other owner's, from now
		takeover bool
	}{
		{"expires within the budget", 3 * time.Second, true},
		{"outlives the budget", 10 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			op, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
			require.NoError(t, err)
			now := e.clock.Now()
			_, held, err := e.store.Claim(e.ctx, op.Scope, op.Key, "replica-b", now, now.Add(tt.lease))
			require.NoError(t, err)

			res, err := e.client.Do(e.ctx, op)
			if tt.takeover {
				require.NoError(t, err, "Do() after the lease expired")
				require.Equal(t, idem.StateSucceeded, res.State)
				require.False(t, e.submits("k")[0].At.Before(held.Expires), "sent at %v, before the lease expired at %v",
					e.submits("k")[0].At, held.Expires)
			} else {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Do()")
				require.ErrorIs(t, err, journal.ErrLeased, "Do()")
				require.Empty(t, e.submits("k"), "submits while another owner holds the lease")
				require.LessOrEqual(t, e.clock.Now().Sub(now), idem.DefaultMaxElapsed, "waited past the budget")
			}
			require.Len(t, e.submits("k"), map[bool]int{true: 1, false: 0}[tt.takeover], "submits")
		})
	}
}

// TestLeaseGivenUpWhenSettledElsewhere: an operator resolves the operation
// while its drive waits out a 409's Retry-After. The drive stops without a
// write of its own, so no write of its drops its lease: it must give the
// lease up itself, or the bbolt journal (leases in memory) keeps an entry
// for every such operation until the process ends.
func TestLeaseGivenUpWhenSettledElsewhere(t *testing.T) {
	e := submitResolvedInBackoff(t)
	// Tokens are journal-wide and count up from 1: whatever token the
	// drive held is among these, and none may still be current.
	for tok := uint64(1); tok <= 8; tok++ {
		_, err := e.store.Renew(e.ctx, journal.Lease{Scope: idem.DefaultScope, Key: "k", Token: tok}, e.clock.Now().Add(time.Hour))
		require.ErrorIs(t, err, journal.ErrLeaseLost, "token %d is still the record's lease", tok)
	}
}
