package pgjournal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// skewedClock is a host clock that is off by skew (NTP broken, a VM's
// clock behind): an idem.Clock that sleeps for real.
type skewedClock struct{ skew time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.skew) }

func (skewedClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// skew is how far the replicas' clocks disagree in these tests: more than
// a default lease (DefaultAttemptTimeout + DefaultLeaseDuration).
const skew = 2 * time.Minute

// TestLeaseSkewedClocks: two replicas (two Stores on one schema) whose
// clocks disagree by minutes agree on every lease: a lease lives for the
// length its holder asked for, as the database's clock measures it,
// whatever either replica's clock says. A claimant whose clock runs fast
// does not take a live lease over (both replicas would send the
// operation); a holder whose clock runs slow is not taken over early (the
// same); a claimant whose clock runs slow, or a holder whose clock runs
// fast, does not keep an expired lease alive for minutes.
func TestLeaseSkewedClocks(t *testing.T) {
	tests := []struct {
		name             string
		holder, claimant time.Duration // each replica's clock, off by
		take             string        // how the holder takes its lease: claim, create, renew
		length           time.Duration // the lease the holder asks for
		live             bool          // the claimant must find it live
	}{
		{"fast claimant meets a live lease", 0, skew, "claim", time.Minute, true},
		{"slow holder's lease lives its length", -skew, 0, "claim", time.Minute, true},
		{"slow holder's created lease lives its length", -skew, 0, "create", time.Minute, true},
		{"slow holder's renewal lives its length", -skew, 0, "renew", time.Minute, true},
		{"slow claimant takes an expired lease", 0, -skew, "claim", 200 * time.Millisecond, false},
		{"fast holder's lease expires on time", skew, 0, "claim", 200 * time.Millisecond, false},
		{"fast holder's renewal expires on time", skew, 0, "renew", 200 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			hs := openStore(t)
			cs, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(hs.Schema()))
			require.NoError(t, err)
			defer cs.Close()
			holder, claimant := skewedClock{tt.holder}, skewedClock{tt.claimant}

			// Two records, due long ago in every replica's clock: one for
			// Claim, one for ClaimDue.
			begin := time.Now()
			var held []journal.Lease
			for _, key := range []string{"by-claim", "by-claim-due"} {
				now := holder.Now()
				rec := journaltest.NewRecord("acct", key, now.Add(-time.Hour))
				rec.Created, rec.Updated = now, now
				var l journal.Lease
				switch tt.take {
				case "create":
					_, l, err = hs.CreateClaimed(ctx, rec, "holder", now.Add(tt.length))
					require.NoError(t, err, "CreateClaimed()")
				case "claim", "renew":
					_, err = hs.Create(ctx, rec)
					require.NoError(t, err, "Create()")
					length := tt.length
					if tt.take == "renew" {
						length = 50 * time.Millisecond // what the renewal extends
					}
					_, l, err = hs.Claim(ctx, "acct", key, "holder", now, now.Add(length))
					require.NoError(t, err, "Claim()")
				}
				if tt.take == "renew" {
					now := holder.Now()
					l, err = hs.Renew(ctx, l, now.Add(tt.length))
					require.NoError(t, err, "Renew()")
					require.True(t, l.Expires.Equal(now.Add(tt.length)), "renewed lease's expiry %v; want the holder's %v", l.Expires, now.Add(tt.length))
				}
				held = append(held, l)
			}

			if tt.live {
				now := claimant.Now()
				_, l, err := cs.Claim(ctx, "acct", "by-claim", "claimant", now, now.Add(time.Minute))
				require.ErrorIs(t, err, journal.ErrLeased, "Claim() of a lease live for %v more", tt.length-time.Since(begin))
				require.Equal(t, "holder", l.Owner)
				// Told in its own clock how long to wait: at most the
				// length, and the holder's calls' time (the lease counts
				// from the database's reading, after the holder's).
				most := tt.length + time.Since(begin)
				require.True(t, l.Expires.After(now) && !l.Expires.After(now.Add(most)),
					"holder's expiry in the claimant's clock %v; want within %v of its now %v", l.Expires, most, now)
				got, err := cs.ClaimDue(ctx, "claimant", now, now.Add(time.Minute), 0)
				require.NoError(t, err)
				require.Empty(t, got, "ClaimDue() of live leases")
				// The holder still writes.
				for _, l := range held {
					_, err := hs.Update(journal.WithLease(ctx, l), l.Scope, l.Key, func(r *journal.Record) error {
						r.Review = "still mine"
						return nil
					})
					require.NoError(t, err, "the holder's write under its live lease (%s)", l.Key)
				}
				return
			}

			// Expired: taken within moments of its length, not minutes.
			var claimed, claimedDue time.Duration
			require.Eventually(t, func() bool {
				now := claimant.Now()
				if claimed == 0 {
					_, _, err := cs.Claim(ctx, "acct", "by-claim", "claimant", now, now.Add(time.Minute))
					if err == nil {
						claimed = time.Since(begin)
					} else if !errors.Is(err, journal.ErrLeased) {
						t.Errorf("Claim(): %v", err)
					}
				}
				if claimedDue == 0 {
					got, err := cs.ClaimDue(ctx, "claimant", now, now.Add(time.Minute), 0)
					require.NoError(t, err)
					for _, c := range got {
						if c.Record.Key == "by-claim-due" {
							claimedDue = time.Since(begin)
						}
					}
				}
				return claimed > 0 && claimedDue > 0
			}, 10*time.Second, 10*time.Millisecond, "the expired leases taken over (Claim after %v, ClaimDue after %v)", claimed, claimedDue)
			require.GreaterOrEqual(t, claimed, tt.length, "Claim() took the lease over before its end")
			require.GreaterOrEqual(t, claimedDue, tt.length, "ClaimDue() took the lease over before its end")
			for _, l := range held {
				_, err := hs.Update(journal.WithLease(ctx, l), l.Scope, l.Key, func(r *journal.Record) error {
					r.Review = "stale"
					return nil
				})
				require.ErrorIs(t, err, journal.ErrLeaseLost, "the holder's write after the takeover (%s)", l.Key)
			}
		})
	}
}

// requestsFor lists the requests the server received for key, submits and
// queries.
func requestsFor(srv *idemtest.Server, key string) []string {
	var out []string
	for _, r := range srv.Requests() {
		if r.Key == key {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// TestLeaseLengthEdges: a lease's length comes from the caller's times, so
// times that give none (a zero now, Created or expiry) are refused rather
// than read as a lease for ever, and a lease to year 9999 is held at
// int64's end, not overflowed.
func TestLeaseLengthEdges(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Now()

	noCreated := journaltest.NewRecord("acct", "no-created", now)
	noCreated.Created = time.Time{}
	_, _, err := s.CreateClaimed(ctx, noCreated, "a", now.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrInvalid, "CreateClaimed() of a record without Created")
	_, err = s.Get(ctx, "acct", "no-created")
	require.ErrorIs(t, err, journal.ErrNotFound, "stored by a refused CreateClaimed()")

	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k", now))
	require.NoError(t, err)
	_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	noEnd := l
	noEnd.Expires = time.Time{}
	_, err = s.Renew(ctx, noEnd, now.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrInvalid, "Renew() of a lease without its expiry")

	// A century and more: held at int64's end, a live lease.
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = s.Renew(ctx, l, far)
	require.NoError(t, err, "Renew() to year 9999")
	_, held, err := s.Claim(ctx, "acct", "k", "b", now, now.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() of a lease renewed to year 9999")
	require.True(t, held.Expires.After(now.Add(100*365*24*time.Hour)), "its end %v", held.Expires)
	_, _, err = s.Claim(ctx, "acct", "k", "a", time.Time{}, now.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrInvalid, "Claim() at the zero time")
	_, err = s.ClaimDue(ctx, "a", time.Time{}, now.Add(time.Minute), 0)
	require.ErrorIs(t, err, journal.ErrInvalid, "ClaimDue() at the zero time")
}
