package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestPrepareTxHeldOpen: a service's transaction that journaled its
// charge stays open (a slow stock check, a lock wait of its own) while two
// replicas' Run pass over and over and another order is placed and
// charged: Run neither waits on its row nor claims or sends the charge,
// nor does a Do for it, until the transaction commits; then the charge is
// sent once. Its first try, in a savepoint the service rolled back (the
// stock reservation failed, and was retried), leaves nothing of its own:
// the same key journaled again after it in the same transaction is the
// one intent.
func TestPrepareTxHeldOpen(t *testing.T) {
	ctx := context.Background()
	schema := openStore(t).Schema()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	a, as := replica(t, ctx, schema, "replica-a", srv, idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
	b, _ := replica(t, ctx, schema, "replica-b", srv, idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	_, err = as.PrepareTx(ctx, sp, a, order(srv, "charge-order-1"))
	require.NoError(t, err, "PrepareTx() in the savepoint")
	require.NoError(t, sp.Rollback(ctx), "the savepoint rolled back")
	op, err := as.PrepareTx(ctx, tx, a, order(srv, "charge-order-1"))
	require.NoError(t, err, "PrepareTx() after the savepoint")

	runA, runB := startRun(t, a), startRun(t, b)
	_, err = a.Prepare(ctx, order(srv, "charge-order-2"))
	require.NoError(t, err)
	waitFor(t, "the other order charged while the transaction is open", func() bool {
		got, err := b.Lookup(ctx, "", "charge-order-2")
		return err == nil && got.State == idem.StateSucceeded
	})
	_, err = b.Do(ctx, op)
	require.ErrorIs(t, err, idem.ErrNotFound, "Do() of an intent not yet committed")
	require.Zero(t, submits(srv, "charge-order-1"), "submits before the commit")

	require.NoError(t, tx.Commit(ctx))
	waitFor(t, "the charge settled once committed", func() bool {
		got, err := a.Lookup(ctx, "", "charge-order-1")
		return err == nil && got.State == idem.StateSucceeded
	})
	runA.end()
	runB.end()
	require.Equal(t, 1, submits(srv, "charge-order-1"), "submits")
	require.Equal(t, 1, srv.Effects("", "charge-order-1"), "orders the server made")
	require.Equal(t, 1, submits(srv, "charge-order-2"), "submits of the other order")
	ops, err := a.List(ctx, idem.Filter{})
	require.NoError(t, err)
	require.Len(t, ops, 2, "operations journaled")
}
