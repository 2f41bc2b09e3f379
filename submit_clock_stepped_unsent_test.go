package idem_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// stepAfterCreate is the journal of a process whose wall clock NTP steps
// back by the offset clk carries right after Submit's record commits:
// between the Submit's reading of the clock and the drive's first one.
type stepAfterCreate struct {
	*journal.Store
	clk *skewedClock
}

func (s stepAfterCreate) CreateClaimed(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	stored, l, err := s.Store.CreateClaimed(ctx, rec, owner, expires)
	s.clk.offset.Store(0)
	return stored, l, err
}

// submitAcrossAStepBack submits key k from a client whose clock reads
// ten seconds fast until the Submit's record is journaled, then is
// stepped back to the server's time (chrony's makestep), so that the
// record's first attempt lies in the future of every later reading.
func submitAcrossAStepBack(t *testing.T, srv *idemtest.Server, shared *idemtest.Clock) (*idem.Client, *journal.Store, error) {
	t.Helper()
	clk := &skewedClock{Clock: shared}
	clk.offset.Store(int64(10 * time.Second))
	store, err := journal.Open(filepath.Join(t.TempDir(), "j"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(stepAfterCreate{store, clk}, idem.WithHTTPClient(srv.Client()), idem.WithClock(clk),
		idem.WithResultEndpoint(srv.URL+"/operations/{key}"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	return c, store, err
}

// A Submit whose clock is stepped back right after its record (with its
// first attempt, unsent) is journaled finds the key window untrusted at
// once, and is flagged (ReviewClockStepped). Its result endpoint was asked
// about the key first, as if the unsent attempt might have executed: the
// query closed that attempt as "may have been sent", for bytes that never
// went. The result endpoint rate-limiting the query (Stripe answers 429
// to reads too: https://docs.stripe.com/rate-limits) sent the call round
// again once the clock had caught up, and the order went out on the
// query's attempt, unjournaled: the journal held the order's 201 as the
// query's answer, and a submit attempt that "may have been sent" before
// it was. Nothing of ours may have executed, so nothing is asked: the
// unsent attempt is closed as never sent, as without a result endpoint.
func TestSubmitUnsentFirstAttemptIsNeverQueriedAfterAClockStepBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault *idemtest.Fault
	}{
		{name: "not found"}, // the fake's 404 for a key it never saw
		{name: "throttled", fault: &idemtest.Fault{Kind: idemtest.Throttle, Key: "k", Query: true, RetryAfter: 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := idemtest.NewClock(epoch)
			srv := newServer(t, idemtest.WithClock(shared.Now))
			if tc.fault != nil {
				require.NoError(t, srv.Inject(*tc.fault))
			}
			_, store, err := submitAcrossAStepBack(t, srv, shared)
			require.ErrorIs(t, err, idem.ErrNeedsReview)

			require.Empty(t, srv.Requests(), "asked about, or sent, a key never sent before")
			require.Zero(t, srv.Effects("", "k"))
			rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, idem.ReviewClockStepped, rec.Review)
			require.Len(t, rec.Attempts, 1, "attempts journaled")
			a := rec.Attempts[0]
			require.Equal(t, journal.AttemptSubmit, a.Kind)
			require.True(t, a.Done, "the unsent attempt left open")
			require.False(t, a.MaybeExecuted(), "the unsent attempt reads as maybe sent: %q", a.Err)
		})
	}
}
