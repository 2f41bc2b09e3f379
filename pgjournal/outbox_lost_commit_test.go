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
	"github.com/idemkit/idem/pgjournal"
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
			o := newOutboxShop(t)
			run := startRun(t, o.c)
			o.cutter.arm("charge-order-1", at)
			require.Error(t, o.placeOrder(order(o.srv, "charge-order-1")), "the business transaction whose COMMIT's answer was lost")
			require.Equal(t, at == afterCommit, o.cutter.wait(t), "committed")
			require.NoError(t, o.placeOrder(order(o.srv, "charge-order-1")), "the same business transaction again")

			waitFor(t, "the charge settled", func() bool {
				op, err := o.c.Lookup(ctx, "", "charge-order-1")
				return err == nil && op.State == idem.StateSucceeded
			})
			run.end()
			require.Equal(t, 1, o.orderRows(t), "order rows")
			require.Equal(t, 1, submits(o.srv, "charge-order-1"), "submits")
			require.Equal(t, 1, o.srv.Effects("", "charge-order-1"), "orders the server made")
		})
	}
}

// TestOutboxWithoutKeyRefused: the same business transaction preparing
// its charge without a Key, each run under a key of its own: its COMMIT's
// answer lost after it committed (the connection reset, as in
// TestOutboxCommitAnswerLost), the caller ran it again as it must, and
// the order row was found but the charge journaled a second time, under
// a new key: one order row, two operations, two charges on the server.
// PrepareTx now refuses a request without a Key before anything is
// written: the key must be one the transaction run again can find.
func TestOutboxWithoutKeyRefused(t *testing.T) {
	ctx := context.Background()
	o := newOutboxShop(t)
	run := startRun(t, o.c)
	keyless := idem.Request{URL: o.srv.URL + "/orders", Body: []byte(`{"order":"order-1","amount":1999}`)}
	err := o.placeOrder(keyless)
	require.ErrorIs(t, err, idem.ErrInvalidRequest, "PrepareTx() of a request without a Key")
	require.NoError(t, o.placeOrder(order(o.srv, "charge-order-1")), "the business transaction with the order's key")
	waitFor(t, "the charge settled", func() bool {
		op, err := o.c.Lookup(ctx, "", "charge-order-1")
		return err == nil && op.State == idem.StateSucceeded
	})
	run.end()
	ops, err := o.c.List(ctx, idem.Filter{})
	require.NoError(t, err)
	require.Len(t, ops, 1, "operations journaled")
	require.Equal(t, 1, o.orderRows(t), "order rows")
	require.Equal(t, 1, o.srv.Stats().SideEffects, "orders the server made")
}

// outboxShop is a service placing order-1 and its charge in one
// transaction (placeOrder), on connections a commitCutter can cut, with a
// Client whose Run looks for due work every 20ms.
type outboxShop struct {
	s      *pgjournal.Store
	srv    *idemtest.Server
	c      *idem.Client
	cutter *commitCutter
	pool   *pgxpool.Pool
	orders string
}

func newOutboxShop(t *testing.T) *outboxShop {
	t.Helper()
	ctx := context.Background()
	o := &outboxShop{s: openStore(t), cutter: &commitCutter{committed: make(chan bool, 1)}}
	var err error
	o.srv, err = idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(o.srv.Close)
	o.c = newClient(t, o.s, o.srv, idem.WithLease("replica-a", idem.DefaultLeaseDuration),
		idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	wrapDial(pc, func(conn net.Conn) net.Conn { return &cutterConn{Conn: conn, c: o.cutter} })
	o.pool, err = pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(o.pool.Close)
	o.orders = pgx.Identifier{o.s.Schema(), "orders"}.Sanitize()
	_, err = o.pool.Exec(ctx, `CREATE TABLE `+o.orders+` (id text PRIMARY KEY)`)
	require.NoError(t, err)
	return o
}

// placeOrder writes order-1, unless it is there (a message delivered
// again), and journals req in the same transaction.
func (o *outboxShop) placeOrder(req idem.Request) error {
	ctx := context.Background()
	return pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+o.orders+` (id) VALUES ('order-1') ON CONFLICT DO NOTHING`); err != nil {
			return err
		}
		_, err := o.s.PrepareTx(ctx, tx, o.c, req)
		return err
	})
}

func (o *outboxShop) orderRows(t *testing.T) int {
	t.Helper()
	var rows int
	require.NoError(t, o.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+o.orders).Scan(&rows))
	return rows
}
