package pgjournal_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestOutboxCommitAnswerLost: the caller's own transaction, its order row
// and the intent PrepareTx journaled in it, loses its COMMIT's answer
// (the connection, or a pooler's to the server, broke): committed or not,
// the caller cannot tell, and does what an outbox caller must, the same
// business transaction again with the same order id and so the same key.
// Run is sending meanwhile. One order row, one request, one order on the
// server, settled, whichever way the first COMMIT went.
func TestOutboxCommitAnswerLost(t *testing.T) {
	for _, at := range []cut{afterCommit, beforeCommit} {
		t.Run(cutNames[at], func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t)
			srv, err := idemtest.NewServer()
			require.NoError(t, err)
			t.Cleanup(srv.Close)
			c := newClient(t, s, srv, idem.WithLease("replica-a", idem.DefaultLeaseDuration),
				idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
			cutter := &commitCutter{committed: make(chan bool, 1)}
			pc, err := pgxpool.ParseConfig(dsn(t))
			require.NoError(t, err)
			wrapDial(pc, func(conn net.Conn) net.Conn { return &cutterConn{Conn: conn, c: cutter} })
			pool, err := pgxpool.NewWithConfig(ctx, pc)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			orders := pgx.Identifier{s.Schema(), "orders"}.Sanitize()
			_, err = pool.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`)
			require.NoError(t, err)

			run := startRun(t, c)
			placeOrder := func() error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id) VALUES ('order-1') ON CONFLICT DO NOTHING`); err != nil {
						return err
					}
					_, err := s.PrepareTx(ctx, tx, c, order(srv, "charge-order-1"))
					return err
				})
			}
			cutter.arm("charge-order-1", at)
			require.Error(t, placeOrder(), "the business transaction whose COMMIT's answer was lost")
			require.Equal(t, at == afterCommit, cutter.wait(t), "committed")
			require.NoError(t, placeOrder(), "the same business transaction again")

			waitFor(t, "the charge settled", func() bool {
				op, err := c.Lookup(ctx, "", "charge-order-1")
				return err == nil && op.State == idem.StateSucceeded
			})
			run.end()
			var rows int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+orders).Scan(&rows))
			require.Equal(t, 1, rows, "order rows")
			require.Equal(t, 1, submits(srv, "charge-order-1"), "submits")
			require.Equal(t, 1, srv.Effects("", "charge-order-1"), "orders the server made")
		})
	}
}
