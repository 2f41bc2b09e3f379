package pgjournal_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemtest"
)

// TestPrepareTxSameKeyTwoTransactions: one order's message delivered to
// two workers at once (at-least-once queues do that), each preparing the
// charge under the order's key in its own transaction, at each isolation
// level an application may use. The second waits on the first's
// uncommitted row; once the first commits, under READ COMMITTED it gets
// the journaled operation; under REPEATABLE READ and SERIALIZABLE
// PostgreSQL fails the statement with a serialization failure (SQLSTATE
// 40001, as it does for any INSERT ... ON CONFLICT meeting a row committed
// after the snapshot), which the worker sees through errors.As and
// answers as PostgreSQL asks, by running its transaction again: that
// finds the operation. Either way one intent, one request, one order.
func TestPrepareTxSameKeyTwoTransactions(t *testing.T) {
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t)
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			c := newClient(t, s, srv)
			pool, err := pgxpool.New(ctx, dsn(t))
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			opts := pgx.TxOptions{IsoLevel: iso}

			first, err := pool.BeginTx(ctx, opts)
			require.NoError(t, err)
			defer func() { _ = first.Rollback(ctx) }()
			second, err := pool.BeginTx(ctx, opts)
			require.NoError(t, err)
			defer func() { _ = second.Rollback(ctx) }()
			// The second worker's snapshot is taken before the first commits.
			_, err = second.Exec(ctx, `SELECT 1`)
			require.NoError(t, err)
			_, err = s.PrepareTx(ctx, first, c, order(srv, "charge-order-1"))
			require.NoError(t, err, "the first worker's PrepareTx()")

			prepared := make(chan error, 1)
			go func() {
				_, err := s.PrepareTx(ctx, second, c, order(srv, "charge-order-1"))
				prepared <- err
			}()
			pid := second.Conn().PgConn().PID()
			waitFor(t, "the second worker waits on the first's row", func() bool {
				var waiting bool
				err := pool.QueryRow(ctx, `SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, pid).Scan(&waiting)
				return err == nil && waiting
			})
			require.NoError(t, first.Commit(ctx))
			err = <-prepared
			if iso == pgx.ReadCommitted {
				require.NoError(t, err, "the second worker's PrepareTx()")
				require.NoError(t, second.Commit(ctx))
			} else {
				var pe *pgconn.PgError
				require.True(t, errors.As(err, &pe), "a serialization failure the worker can tell: %v", err)
				require.Equal(t, "40001", pe.Code)
				require.NoError(t, second.Rollback(ctx))
				require.NoError(t, pgx.BeginTxFunc(ctx, pool, opts, func(tx pgx.Tx) error {
					op, err := s.PrepareTx(ctx, tx, c, order(srv, "charge-order-1"))
					if err == nil && op.Key != "charge-order-1" {
						err = errors.New("another operation: " + op.Key)
					}
					return err
				}), "the second worker's transaction run again")
			}

			sum, err := c.Resume(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, sum.Visited, "operations journaled")
			require.Equal(t, 1, submits(srv, "charge-order-1"), "submits")
			require.Equal(t, 1, srv.Effects("", "charge-order-1"), "orders the server made")
		})
	}
}
