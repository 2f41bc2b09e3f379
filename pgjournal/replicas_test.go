package pgjournal_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// replica is one process of a service: its own Store (pool) on the shared
// schema, and its own Client under its own lease owner.
func replica(t testing.TB, ctx context.Context, schema, owner string, srv *idemtest.Server, opts ...idem.Option) (*idem.Client, *pgjournal.Store) {
	t.Helper()
	s, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	opts = append([]idem.Option{
		idem.WithHTTPClient(srv.Client()),
		idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithLease(owner, idem.DefaultLeaseDuration),
	}, opts...)
	c, err := idem.New(s, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, s
}

// submits counts the submits the server received for key.
func submits(srv *idemtest.Server, key string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Key == key && r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// waitFor polls cond every few milliseconds until it holds or 10s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, what)
}

// TestSameKeyTwoReplicas: while replica A's request is in flight, replica
// B's Do for the same key finds A's live lease and sends nothing: with a
// budget longer than A's call it returns A's outcome, with a shorter one
// it reports the outcome unknown (journal.ErrLeased), never a second
// request. So too when their clocks disagree by more than a lease: B's
// fast or A's slow (leases are judged by the database's clock).
func TestSameKeyTwoReplicas(t *testing.T) {
	tests := []struct {
		name    string
		bBudget time.Duration
		aClock  time.Duration // off by
		bClock  time.Duration
		settled bool // B returns A's outcome
	}{
		{"B waits for A", 20 * time.Second, 0, 0, true},
		{"B's budget ends first", 200 * time.Millisecond, 0, 0, false},
		{"B's clock fast", 20 * time.Second, 0, skew, true},
		{"A's clock slow", 20 * time.Second, -skew, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			schema := openStore(t).Schema()
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			defer srv.Close()
			a, _ := replica(t, ctx, schema, "replica-a", srv, idem.WithClock(skewedClock{tt.aClock}))
			b, _ := replica(t, ctx, schema, "replica-b", srv, idem.WithMaxElapsed(tt.bBudget), idem.WithClock(skewedClock{tt.bClock}))

			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: "k", Delay: time.Second}))
			req := idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)}
			aDone := make(chan error, 1)
			go func() {
				_, err := a.Submit(ctx, req)
				aDone <- err
			}()
			waitFor(t, "A's submit reached the server", func() bool { return submits(srv, "k") == 1 })

			op, err := b.Lookup(ctx, "", "k")
			require.NoError(t, err)
			res, err := b.Do(ctx, op)
			aErr := <-aDone
			// B sent nothing, not even a query, while A drove.
			require.Len(t, requestsFor(srv, "k"), 1, "requests for the key across both replicas")
			require.NoError(t, aErr, "A's Submit(): its outcome written under its lease")
			require.Equal(t, tt.settled, res.State == idem.StateSucceeded, "B's Do() state %s", res.State)
			if !tt.settled {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "B's Do()")
				require.ErrorIs(t, err, journal.ErrLeased, "B's Do() says another owner drives it")
			} else {
				require.NoError(t, err, "B's Do()")
			}
			require.Equal(t, 1, submits(srv, "k"), "submits for the key across both replicas")
			require.Equal(t, 1, srv.Effects("", "k"), "side effects")
		})
	}
}

// TestTakeoverAfterExpiry: a replica that died holding a lease leaves the
// operation to another replica's Run once the lease expires, and the dead
// replica's late write is refused.
func TestTakeoverAfterExpiry(t *testing.T) {
	ctx := context.Background()
	schema := openStore(t).Schema()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	b, bs := replica(t, ctx, schema, "replica-b", srv, idem.WithReconcile(100*time.Millisecond, time.Minute, time.Hour))

	// Replica A journaled the operation, claimed it with a short lease and
	// died before sending.
	a, as := replica(t, ctx, schema, "replica-a", srv)
	op, err := a.Prepare(ctx, idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1}`)})
	require.NoError(t, err)
	now := time.Now()
	_, dead, err := as.Claim(ctx, op.Scope, op.Key, "replica-a", now, now.Add(300*time.Millisecond))
	require.NoError(t, err)
	_, err = bs.Update(ctx, op.Scope, op.Key, func(r *journal.Record) error {
		r.NextDue = now // due now: A never handed it off
		return nil
	})
	require.NoError(t, err)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- b.Run(runCtx) }()
	waitFor(t, "B's Run settled the operation after A's lease expired", func() bool {
		got, err := b.Lookup(ctx, op.Scope, op.Key)
		return err == nil && got.State == idem.StateSucceeded
	})
	stop()
	require.ErrorIs(t, <-ran, context.Canceled)
	require.False(t, time.Now().Before(dead.Expires), "settled before A's lease expired")
	require.Equal(t, 1, srv.Effects("", "k"))

	_, err = as.Update(journal.WithLease(ctx, dead), op.Scope, op.Key, func(r *journal.Record) error {
		r.Review = "stale"
		return nil
	})
	require.True(t, errors.Is(err, journal.ErrLeaseLost) || errors.Is(err, journal.ErrTerminal),
		"the dead replica's late write: %v", err)
	got, err := b.Lookup(ctx, op.Scope, op.Key)
	require.NoError(t, err)
	require.Empty(t, got.Review, "late write changed the record")
}
