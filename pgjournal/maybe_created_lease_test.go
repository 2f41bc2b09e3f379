package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestMaybeCreatedLeaseReleased: replica A's Submit whose create (the
// record with A's lease, one write) may or may not have committed sends
// nothing and reports the outcome unknown. If it did commit, the lease it
// took is A's no longer (no drive of A's uses it): A gives it up, so that
// replica B's Submit of the same request, which A's caller may well have
// retried through B, settles it at once with one order, rather than wait
// for the lease to expire (the attempt timeout plus DefaultLeaseDuration,
// 40 s). Rolled back, B's Submit journals it afresh. Both replicas run at
// default settings.
func TestMaybeCreatedLeaseReleased(t *testing.T) {
	const key = "maybe-created-order"
	// quick is far below the 40 s A's lease would have lasted.
	const quick = 10 * time.Second
	ctx := context.Background()
	for _, at := range []cut{afterCommit, beforeCommit} {
		name := map[cut]string{afterCommit: "committed", beforeCommit: "rolled back"}[at]
		t.Run(name, func(t *testing.T) {
			s, cutter := openCutStore(t)
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			a := newClient(t, s, srv, idem.WithLease("replica-a", idem.DefaultLeaseDuration))
			b, _ := replica(t, ctx, s.Schema(), "replica-b", srv)

			cutter.arm(key, at)
			_, err = a.Submit(ctx, order(srv, key))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome, "A's Submit() cut")
			require.ErrorIs(t, err, journal.ErrMaybeCommitted, "A's Submit() cut")
			require.Equal(t, at == afterCommit, cutter.wait(t), "committed")
			require.Empty(t, requestsFor(srv, key), "requests for an operation not known to be journaled")

			begin := time.Now()
			res, err := b.Submit(ctx, order(srv, key))
			took := time.Since(begin)
			require.NoError(t, err, "B's Submit()")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Less(t, took, quick, "B's Submit() waited for A's lease")
			require.Equal(t, 1, submits(srv, key), "submits")
			require.Equal(t, 1, srv.Effects("", key), "side effects")
		})
	}
}
