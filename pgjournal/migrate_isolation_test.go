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
		t.Run(level, func(t *testing.T) { migrateInterleaved(t, level) })
	}
}

func migrateInterleaved(t *testing.T, level string) {
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

	// replica opens a Store on schema whose second advisory lock (its
	// first step's) waits for release, before being sent (before) or
	// once taken (after), and says so on reached.
	replica := func(before bool, reached, release chan struct{}) *pgjournal.Store {
		pc, err := pgxpool.ParseConfig(dsn(t))
		require.NoError(t, err)
		pc.ConnConfig.RuntimeParams["default_transaction_isolation"] = level
		pc.ConnConfig.Tracer = &lockPause{before: before, reached: reached, release: release}
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
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
	reach(bAt, "b's step took its lock")
	go func() { errs <- a.Migrate(ctx) }()
	reach(aAt, "a's step held its lock")
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

// lockPause holds its connection's second advisory lock statement until
// release: before it is sent, or after it is answered.
type lockPause struct {
	before           bool
	locks            atomic.Int32
	reached, release chan struct{}
}

func (p *lockPause) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_advisory_xact_lock") && p.locks.Add(1) == 2 {
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
