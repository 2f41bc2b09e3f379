package pgjournal_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/pgjournal"
)

// TestMigrateStricterDefaultIsolation: replicas starting at once on a
// database or role whose default_transaction_isolation is repeatable
// read or serializable. PostgreSQL: "a query in a repeatable read
// transaction sees a snapshot as of the start of the first non-transaction-control
// statement in the transaction" (transaction-iso.html), and in Migrate's
// transactions that statement is the advisory lock's, whose snapshot is
// taken before it waits. Replica b waited for the lock while replica a
// made step 1, then read the versions as they were before a's commit
// (none), ran step 1 again and failed: relation "records" already
// exists (SQLSTATE 42P07), its start-up failed. Migrate's transactions
// now run READ COMMITTED, whose statements each read what committed
// before them. The interleaving is held by tracers: b paused before its
// step's lock, a paused holding its step's lock, then b let go to wait
// for it (seen in pg_locks), then a let go.
func TestMigrateStricterDefaultIsolation(t *testing.T) {
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) { migrateInterleaved(t, level, 2) })
	}
}

// TestMigrateAfterWaitingForTheSchema: replica b read the schema's
// version before taking the lock (the read that spares a role with data
// rights alone), found no schema, then waited for the lock while replica
// a created it. PostgreSQL caches catalog lookups in each backend, a
// name's absence too, and brings its caches up to date when a
// transaction starts or takes a lock on a relation, not an advisory lock
// (modelled on PostgreSQL 15's inval.c and lmgr.c: LockRelationOid calls
// AcceptInvalidationMessages; pg_advisory_xact_lock does not): b's
// CREATE SCHEMA IF NOT EXISTS then believed the absence it had cached,
// and failed with duplicate key value violates unique constraint
// "pg_namespace_nspname_index" (SQLSTATE 23505), b's start-up failed.
// Behind PgBouncer any replica's read leaves it in a shared backend.
// The locked transaction now asks pg_namespace whether the schema exists
// before creating it: a statement of its own, read after the lock.
func TestMigrateAfterWaitingForTheSchema(t *testing.T) {
	migrateInterleaved(t, "read committed", 1)
}

// migrateInterleaved has replicas a and b migrate a new schema at
// default_transaction_isolation level, b paused before its nth advisory
// lock, a paused holding its nth, then b let go to wait for a's lock,
// then a let go: both must succeed.
func migrateInterleaved(t *testing.T, level string, nth int32) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := fmt.Sprintf("mi%d_%d", os.Getpid(), schemas.Add(1))
	lock := pgjournal.MigrateLockID(schema)
	admin, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	})

	// replica opens a Store on schema whose nth advisory lock of it waits
	// for release, before being sent (before) or once taken (after), and
	// says so on reached. Its pool has one connection, warmed by a
	// Migrate of another schema first (as a long-running pooler's server
	// connections are): a cold backend's first statements read the
	// catalogs, which also brings its caches up to date.
	replica := func(before bool, reached, release chan struct{}) *pgjournal.Store {
		pc, err := pgxpool.ParseConfig(dsn(t))
		require.NoError(t, err)
		pc.MaxConns = 1
		pc.ConnConfig.RuntimeParams["default_transaction_isolation"] = level
		pc.ConnConfig.Tracer = &lockPause{lock: lock, nth: nth, before: before, reached: reached, release: release}
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		warm := fmt.Sprintf("%s_warm%d", schema, schemas.Add(1))
		w, err := pgjournal.New(pool, pgjournal.WithSchema(warm))
		require.NoError(t, err)
		require.NoError(t, w.Migrate(ctx), "Migrate() of %s", warm)
		require.NoError(t, w.DropSchema(ctx, warm))
		s, err := pgjournal.New(pool, pgjournal.WithSchema(schema))
		require.NoError(t, err)
		return s
	}
	bAt, bGo, aAt, aGo := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	a, b := replica(false, aAt, aGo), replica(true, bAt, bGo)
	errs := make(chan error, 2)
	reach := func(at chan struct{}, what string) {
		select {
		case <-at:
		case err := <-errs:
			t.Fatalf("Migrate() returned before %s: %v", what, err)
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
	go func() { errs <- b.Migrate(ctx) }()
	reach(bAt, "b took its lock")
	go func() { errs <- a.Migrate(ctx) }()
	reach(aAt, "a held its lock")
	close(bGo)
	require.Eventually(t, func() bool {
		var waiting int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND ((classid::int8 << 32) | objid::int8) = $1`, lock).Scan(&waiting)
		return err == nil && waiting == 1
	}, 30*time.Second, 5*time.Millisecond, "b waits for a's lock")
	close(aGo)
	for range 2 {
		require.NoError(t, <-errs, "Migrate() by replicas starting at once under %s", level)
	}
	var version int
	require.NoError(t, admin.QueryRow(ctx, `SELECT max(version) FROM `+pgx.Identifier{schema, "schema_version"}.Sanitize()).Scan(&version))
	require.Equal(t, pgjournal.SchemaVersion, version)
}

// lockPause holds its pool's nth statement taking advisory lock lock
// until release: before it is sent, or after it is answered.
type lockPause struct {
	lock             int64
	nth              int32
	before           bool
	locks            atomic.Int32
	reached, release chan struct{}
}

func (p *lockPause) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_advisory_xact_lock") && len(d.Args) == 1 && d.Args[0] == p.lock && p.locks.Add(1) == p.nth {
		ctx = context.WithValue(ctx, pausedKey{}, true)
		if p.before {
			close(p.reached)
			<-p.release
		}
	}
	return ctx
}

func (p *lockPause) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(pausedKey{}) != nil && !p.before {
		close(p.reached)
		<-p.release
	}
}

// pausedKey marks the context of the statement lockPause holds.
type pausedKey struct{}
