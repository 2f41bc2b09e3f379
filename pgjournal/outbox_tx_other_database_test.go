package pgjournal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestPrepareTxInATransactionOnAnotherDatabase: a service whose orders
// live in a database of their own, migrated with the default schema too
// (the service's other Store journals there, as in
// TestPrepareTxForAClientOfAnotherJournal), and whose Client journals
// to a journal database. PrepareTx on the journal's Store, given the
// Client of that Store and a transaction on the orders database (the
// pool the service's business transactions use), wrote the intent to
// the orders database's table and committed it with the order row:
// the Client's Resume and Run, reading the journal database, never saw
// it, and the order was never charged (0 requests, no error), its
// intent left in a journal no Run of that Client's reads. Such a call
// is now refused (ErrInvalidRequest) with nothing written, the
// transaction left usable; a transaction on the journal's database,
// directly or through PgBouncer, still journals there and is sent once.
func TestPrepareTxInATransactionOnAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	s := openStore(t)
	c := newClient(t, s, srv)
	ordersStore := storeInAnotherDatabase(t, s.Schema())
	ordersDB := newPool(t, func(pc *pgxpool.Config) { pc.ConnConfig.Database = s.Schema() + "_db" }) // storeInAnotherDatabase's
	journalDB := newPool(t, func(*pgxpool.Config) {})
	viaBouncer, err := pgxpool.New(ctx, startPgBouncer(t)+"&default_query_exec_mode=exec")
	require.NoError(t, err)
	t.Cleanup(viaBouncer.Close)
	orders := pgx.Identifier{s.Schema(), "orders"}.Sanitize()
	for _, p := range []*pgxpool.Pool{ordersDB, journalDB} {
		_, err := p.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`)
		require.NoError(t, err)
	}

	tests := []struct {
		name string
		pool *pgxpool.Pool
		ok   bool
	}{
		{"the orders database", ordersDB, false},
		{"the journal's database", journalDB, true},
		{"the journal's database through PgBouncer", viaBouncer, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("charge-order-%d", i)
			var prepErr error
			require.NoError(t, pgx.BeginFunc(ctx, tt.pool, func(tx pgx.Tx) error {
				_, prepErr = s.PrepareTx(ctx, tx, c, order(srv, key))
				// Still usable: the service may commit its row and
				// charge another way.
				_, err := tx.Exec(ctx, `INSERT INTO `+orders+` VALUES ($1)`, key)
				return err
			}), "the business transaction")
			_, err := c.Resume(ctx)
			require.NoError(t, err)
			if !tt.ok {
				require.Zero(t, submits(srv, key), "submits")
				_, err = ordersStore.Get(ctx, idem.DefaultScope, key)
				require.ErrorIs(t, err, journal.ErrNotFound, "an intent in the orders database's journal, which the Client's Run never reads")
				_, err = s.Get(ctx, idem.DefaultScope, key)
				require.ErrorIs(t, err, journal.ErrNotFound)
				require.ErrorIs(t, prepErr, idem.ErrInvalidRequest, "PrepareTx() in a transaction on another database")
				return
			}
			require.NoError(t, prepErr)
			requireChargedOnce(t, c, srv, key)
		})
	}
}

// TestPrepareTxOnASharedPoolOfOne: the outbox as the README sets it up, a
// Store made with New on the pool the service's transactions use, and
// Migrate called at start-up, here with a pool of one connection, which
// the business transaction holds. PrepareTx compares the transaction's
// database with the Store's: read on the pool then, it would wait for
// the transaction's own connection until the call timeout. Migrate read
// it on its connection: the intent is journaled at once, and sent once.
func TestPrepareTxOnASharedPoolOfOne(t *testing.T) {
	ctx := context.Background()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	schema := openStore(t).Schema()
	pool := newPool(t, func(pc *pgxpool.Config) { pc.MaxConns = 1 })
	s, err := pgjournal.New(pool, pgjournal.WithSchema(schema), pgjournal.WithCallTimeout(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	c := newClient(t, s, srv)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := s.PrepareTx(ctx, tx, c, order(srv, "charge-order-1"))
		return err
	}), "the business transaction")
	_, err = c.Resume(ctx)
	require.NoError(t, err)
	requireChargedOnce(t, c, srv, "charge-order-1")
}

// TestPrepareTxAfterTheDatabaseMoved: the outbox on a shared pool of one
// (TestPrepareTxOnASharedPoolOfOne) whose address a switchover points at
// another database (a blue/green switchover behind PgBouncer, modelled by
// re-pointing it): Migrate read the first, the business transaction runs
// on the second. PrepareTx read the Store's database again on the pool
// before refusing, waiting for the connection the transaction holds:
// each call failed after the call timeout, nothing journaled, and no
// order could be placed until the process restarted. The transaction's
// connection, made to the Store's pool's address, tells where the pool
// reaches now: the intent is journaled there, and sent once.
func TestPrepareTxAfterTheDatabaseMoved(t *testing.T) {
	ctx := context.Background()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	blue := openStore(t)
	green := storeInAnotherDatabase(t, blue.Schema())
	cfg, err := pgconn.ParseConfig(dsn(t))
	require.NoError(t, err)
	bouncer, moveTo := startMovablePgBouncer(t, cfg.Host, cfg.Port, cfg.Database)
	pool, err := pgxpool.New(ctx, bouncer+"&default_query_exec_mode=exec&pool_max_conns=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgjournal.New(pool, pgjournal.WithSchema(blue.Schema()))
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	c := newClient(t, s, srv)

	moveTo(blue.Schema() + "_db") // storeInAnotherDatabase's
	waitFor(t, "PgBouncer moved", func() bool {
		var db string
		return pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db) == nil && db == blue.Schema()+"_db"
	})
	for _, key := range []string{"charge-order-1", "charge-order-2"} {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := s.PrepareTx(ctx, tx, c, order(srv, key))
			return err
		}), "the business transaction")
		_, err = c.Resume(ctx)
		require.NoError(t, err)
		requireChargedOnce(t, c, srv, key)
		_, err = green.Get(ctx, idem.DefaultScope, key)
		require.NoError(t, err, "the intent, in the database the pool reaches now")
		_, err = blue.Get(ctx, idem.DefaultScope, key)
		require.ErrorIs(t, err, journal.ErrNotFound)
	}
}
