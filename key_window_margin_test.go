package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// Stripe forgets a key once it is "at least 24 hours old"
// (docs.stripe.com/api/idempotent_requests), and has no result endpoint:
// an order whose answer was lost is settled by resending its key.
// KeyRetentionStripe is that minimum, with nothing to spare. The order was
// journaled by one replica; the one that resumes it (replicas sharing a
// PostgreSQL journal, or the service moved to another host) has a clock
// three minutes slow. A minute after the server forgot the key, that clock
// makes it 23 h 58 min old: a resend is a second order. idem stops
// resending a margin before the window ends.
func TestKeyWindowMarginCoversSlowReplicaClock(t *testing.T) {
	clock, srv, store := lostStripeOrder(t)
	require.Equal(t, 1, srv.Effects("", "k"), "the first replica's order")

	clock.Advance(idem.KeyRetentionStripe + time.Minute)
	sum := resumeOnSlowReplica(t, store, srv.Client(), clock)
	require.Equal(t, 1, srv.Effects("", "k"), "orders: resent on a key the server forgot")
	require.Equal(t, 1, sum.Review)
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewKeyExpired, rec.Review)
}

// Inside the window less its margin an order is resent and settles by the
// server's replay; past it nothing is sent, even though the server may
// still hold the key, and the operation waits for a person.
func TestKeyWindowMarginEndsResends(t *testing.T) {
	margin := min(idem.KeyWindowMargin, idem.KeyRetentionStripe/10)
	for _, tt := range []struct {
		name    string
		age     time.Duration
		sent    int
		state   idem.State
		review  string
		summary func(idem.Summary) int
	}{
		{"a minute before the margin", idem.KeyRetentionStripe - margin - time.Minute, 1, idem.StateSucceeded, "", func(s idem.Summary) int { return s.Succeeded }},
		{"at the margin", idem.KeyRetentionStripe - margin, 0, idem.StateUnknown, idem.ReviewKeyExpired, func(s idem.Summary) int { return s.Review }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock, srv, store := lostStripeOrder(t)
			before := len(srv.Requests())

			clock.Advance(tt.age)
			c, err := idem.New(store, idem.WithHTTPClient(&http.Client{Transport: srv.Client().Transport}), idem.WithClock(clock),
				idem.WithKeyRetention(idem.KeyRetentionStripe))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			sum, err := c.Resume(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, tt.summary(sum), "summary %+v", sum)
			heads := 0
			for _, r := range srv.Requests()[before:] {
				if r.Method == http.MethodHead {
					heads++ // the clock probe before a resend: no key
				}
			}
			require.Equal(t, tt.sent, heads, "clock probes on resume (one before the resend)")
			require.Equal(t, tt.sent, len(srv.Requests())-before-heads, "requests on resume")
			for _, r := range srv.Requests() {
				if r.Method != http.MethodHead {
					require.Equal(t, "k", r.Key)
				}
			}
			require.Equal(t, 1, srv.Effects("", "k"), "orders")
			rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, tt.state, rec.State)
			require.Equal(t, tt.review, rec.Review)
		})
	}
}

// lostStripeOrder journals order "k" to a server that keeps keys as
// Stripe does, which took it and whose answer was lost, and closes the
// client that sent it.
func lostStripeOrder(t *testing.T) (*idemtest.Clock, *idemtest.Server, *journal.Store) {
	t.Helper()
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(idem.KeyRetentionStripe))
	store, submit, closeFirst := unconfirmed(t, clock)
	submit(srv, "k")
	closeFirst()
	return clock, srv, store
}

// resumeOnSlowReplica runs Resume on store by a client that keeps keys as
// Stripe does, whose clock reads three minutes behind clock's.
func resumeOnSlowReplica(t *testing.T, store *journal.Store, hc *http.Client, clock *idemtest.Clock) idem.Summary {
	t.Helper()
	slow := &steppedClock{Clock: clock, from: epoch, to: epoch.Add(100 * time.Hour), ahead: -3 * time.Minute}
	c, err := idem.New(store, idem.WithHTTPClient(hc), idem.WithClock(slow), idem.WithKeyRetention(idem.KeyRetentionStripe))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	return sum
}
