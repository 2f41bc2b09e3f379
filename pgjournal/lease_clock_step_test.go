package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal/journaltest"
)

// TestLeaseKeepsTheHolderMonotonicClock: every lease the Store hands out
// carries the expiry its holder asked for, monotonic clock reading
// included, so that Renew reckons the extension (the new expiry less the
// old) in the holder's monotonic clock. Reckoned in its wall clock, as
// when the Store handed back the expiry as the database holds it (UTC, no
// monotonic reading), a wall clock stepped forward between a claim and its
// renewal (NTP correcting a clock hours slow) lengthened the database's
// lease by the step: a holder that died then kept every other replica off
// the operation for hours, perhaps past the server's key window. A test
// cannot step the machine's clock; it checks the reading is kept, which is
// what Renew's reckoning rests on (time.Time.Sub).
func TestLeaseKeepsTheHolderMonotonicClock(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	monotonic := func(name string, asked, got time.Time) {
		t.Helper()
		require.True(t, asked == got, "%s: lease expiry %v; want the holder's own %v", name, got, asked)
		require.False(t, got == got.Round(0), "%s: the expiry has no monotonic reading", name)
	}

	now := time.Now()
	rec := journaltest.NewRecord("acct", "created", now.Add(-time.Hour))
	expires := now.Add(time.Minute)
	_, l, err := s.CreateClaimed(ctx, rec, "holder", expires)
	require.NoError(t, err)
	monotonic("CreateClaimed", expires, l.Expires)

	renewed := time.Now().Add(2 * time.Minute)
	l, err = s.Renew(ctx, l, renewed)
	require.NoError(t, err)
	monotonic("Renew", renewed, l.Expires)
	require.NoError(t, s.Release(ctx, l))

	now = time.Now()
	expires = now.Add(time.Minute)
	_, l, err = s.Claim(ctx, "acct", "created", "holder", now, expires)
	require.NoError(t, err)
	monotonic("Claim", expires, l.Expires)
	require.NoError(t, s.Release(ctx, l))

	now = time.Now()
	expires = now.Add(time.Minute)
	claimed, err := s.ClaimDue(ctx, "holder", now, expires, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	monotonic("ClaimDue", expires, claimed[0].Lease.Expires)

	// An expiry the database cannot hold is the one it holds.
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err = s.Renew(ctx, claimed[0].Lease, far)
	require.NoError(t, err)
	require.False(t, l.Expires.Equal(far), "renewed past what the database holds: %v", l.Expires)
}
