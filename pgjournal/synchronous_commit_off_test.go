package pgjournal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// The database of these tests: its DBA turned synchronous_commit off for
// throughput (ALTER DATABASE ... SET synchronous_commit = off, a common
// tuning). PostgreSQL's documentation (runtime-config-wal.html,
// synchronous_commit): "When off, there can be a delay between when
// success is reported to the client and when the transaction is really
// guaranteed to be safe against a server crash. (The maximum delay is
// three times wal_writer_delay.)", and "the behavior for any one
// transaction is determined by the setting in effect when it commits";
// wal-async-commit.html: "the most recent transactions may be lost if the
// database should crash". wal_writer_delay is raised to its maximum (10s)
// so that the WAL writer's own flush does not land between the journal's
// write and the crash by chance (modelled: a crash within three times the
// default 200ms).

// TestAsynchronousCommitDatabaseCrash: the database crashes while a
// submit is in flight. The journal's create was acknowledged, so the
// submit was sent; the crash then took the create with it: an order made
// at the server and no record of it, which neither Resume nor Run would
// ever settle (0 rows after the restart, 1 order). The Store's
// transactions now commit synchronously whatever the database's default:
// the record outlives the crash and Resume settles it (1 row, 1 submit,
// 1 order).
func TestAsynchronousCommitDatabaseCrash(t *testing.T) {
	ctx := context.Background()
	pg, store, srv := startAsyncCommitRig(t)
	c := newClient(t, store, srv)
	req := order(srv, "async-commit-crash")
	// Answered after the crash: the outcome is never written.
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: req.Key, Delay: 2 * time.Second}))
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, req)
		done <- err
	}()
	waitFor(t, "the submit reached the server", func() bool { return submits(srv, req.Key) == 1 })
	pg.Crash(t)
	require.ErrorIs(t, <-done, idem.ErrUnknownOutcome, "the Submit whose outcome could not be written")
	pg.Start(t)

	rec := getAfterRestart(t, store, req.Key)
	require.True(t, rec.Open(), "state %s", rec.State)
	settledOnce(t, c, store, srv, req.Key)
}

// TestAsynchronousCommitOutboxCrash: the application's own transaction,
// its order row and the intent PrepareTx journaled in it, commits
// asynchronously (the database's default: the Store does not set its
// caller's transaction), and Run sends the intent; the database crashes
// while the request is in flight. Run's claim used to commit
// asynchronously too, so the crash took the order row and the intent
// with it: a charge made at the server for an order that does not exist,
// and no record of it (0 order rows, 0 records, 1 charge). Run's claim,
// a synchronous commit, now flushes the WAL up to it, the caller's
// earlier commit included, before the request is sent: 1 order row, 1
// record, which Resume settles, 1 charge.
func TestAsynchronousCommitOutboxCrash(t *testing.T) {
	ctx := context.Background()
	pg, store, srv := startAsyncCommitRig(t)
	c := newClient(t, store, srv, idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
	app, err := pgxpool.New(ctx, pg.DSN)
	require.NoError(t, err)
	t.Cleanup(app.Close)
	orders := pgx.Identifier{store.Schema(), "orders"}.Sanitize()
	_, err = app.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `CHECKPOINT`)
	require.NoError(t, err)

	req := order(srv, "charge-order-1")
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: req.Key, Delay: 2 * time.Second}))
	require.NoError(t, pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+orders+` (id) VALUES ('order-1')`); err != nil {
			return err
		}
		_, err := store.PrepareTx(ctx, tx, c, req)
		return err
	}))
	run := startRun(t, c)
	waitFor(t, "Run sent the charge", func() bool { return submits(srv, req.Key) == 1 })
	pg.Crash(t)
	// Its drive ends with the outcome unwritten, as the Submit's did.
	run.stop()
	<-run.ran
	pg.Start(t)

	rec := getAfterRestart(t, store, req.Key)
	require.True(t, rec.Open(), "state %s", rec.State)
	var rows int
	app.Reset() // its connections died with the server
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM `+orders).Scan(&rows))
	require.Equal(t, 1, rows, "order rows")
	settledOnce(t, c, store, srv, req.Key)
}

// startAsyncCommitRig starts a private server whose database commits
// asynchronously by default, opens a migrated Store on it whose schema is
// on disk (CHECKPOINT: only what the test writes is left to a crash), and
// starts a fake API server; cleanup closes them.
func startAsyncCommitRig(t *testing.T) (*privateServer, *pgjournal.Store, *idemtest.Server) {
	t.Helper()
	ctx := context.Background()
	pg := startPrivateServer(t)
	dba, err := pgx.Connect(ctx, pg.DSN)
	require.NoError(t, err)
	for _, sql := range []string{
		`ALTER DATABASE postgres SET synchronous_commit = off`,
		`ALTER SYSTEM SET wal_writer_delay = '10s'`,
		`SELECT pg_reload_conf()`,
	} {
		_, err := dba.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	// Opened after the ALTER DATABASE: its sessions start with it.
	store, err := pgjournal.Open(ctx, pg.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.Migrate(ctx))
	_, err = dba.Exec(ctx, `CHECKPOINT`)
	require.NoError(t, err)
	require.NoError(t, dba.Close(ctx))
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return pg, store, srv
}

// getAfterRestart reads key's record once the restarted server answers
// (the pool's connections died with it), and fails the test if it is not
// there.
func getAfterRestart(t *testing.T, store *pgjournal.Store, key string) *journal.Record {
	t.Helper()
	var rec *journal.Record
	var err error
	require.Eventually(t, func() bool {
		rec, err = store.Get(context.Background(), idem.DefaultScope, key)
		return err == nil || errors.Is(err, journal.ErrNotFound)
	}, 30*time.Second, 10*time.Millisecond, "the restarted server answers")
	require.NoError(t, err, "the operation sent before the crash is journaled after it")
	return rec
}

// settledOnce has c's Resume settle key's open operation, and checks it
// succeeded with one submit and one order at the server.
func settledOnce(t *testing.T, c *idem.Client, store *pgjournal.Store, srv *idemtest.Server, key string) {
	t.Helper()
	ctx := context.Background()
	sum, err := c.Resume(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Visited, "operations Resume found open")
	rec, err := store.Get(ctx, idem.DefaultScope, key)
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, rec.State)
	require.Equal(t, 1, submits(srv, key), "submits")
	require.Equal(t, 1, srv.Effects("", key), "orders made")
}
