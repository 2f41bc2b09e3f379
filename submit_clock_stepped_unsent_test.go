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
// first attempt, unsent) is journaled sends its order, once: nothing of
// it was sent, so no key window can have passed, and no query can find
// anything of ours. The unsent attempt was counted as one that may have
// executed: the key window, its first attempt in the clock's future,
// read as untrusted, and the result endpoint was asked about a key never
// sent; the query closed the attempt as "may have been sent", for bytes
// that never went, and with the endpoint rate-limiting the query (Stripe
// answers 429 to reads too: https://docs.stripe.com/rate-limits) the
// order went out later on the query's attempt, unjournaled. Kept from
// the query, the order was flagged for a person (ReviewClockStepped),
// which Resume and Run never send: an order never placed.
func TestSubmitUnsentFirstAttemptIsSentOnceAfterAClockStepBack(t *testing.T) {
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
			require.NoError(t, err)

			require.Equal(t, map[string]int{"k": 1}, serverSubmits(t, srv), "submits: the order, once")
			require.Len(t, srv.Requests(), 1, "requests: the submit only, no query")
			require.Equal(t, 1, srv.Effects("", "k"))
			rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			require.Equal(t, journal.StateSucceeded, rec.State)
			require.Empty(t, rec.Review)
			require.Len(t, rec.Attempts, 1, "attempts journaled")
			a := rec.Attempts[0]
			require.Equal(t, journal.AttemptSubmit, a.Kind)
			require.True(t, a.Done)
			require.Equal(t, 201, a.Status, "the order's answer, on its own attempt")
		})
	}
}
