package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestCommitCutMidAnswerDropsConn: the Store reads its COMMIT's answer
// itself (pgconn's ReceiveMessage, which leaves the connection open when
// the context ends mid-read, where pgx's own Exec closes it), and the
// call's bound ends while the COMMIT waits for a synchronous standby that
// never confirms. The write may have committed (journal.ErrMaybeCommitted),
// and the connection, whose COMMIT's answer is still on its way, must not
// go back to the pool: the next statement on it would read that answer as
// its own. The pool has one connection, so a reused one would serve the
// next write; the server answers the cut COMMIT once the standby is no
// longer required.
func TestCommitCutMidAnswerDropsConn(t *testing.T) {
	ctx := context.Background()
	var pool *pgxpool.Pool
	store, _, _, admin := startSyncRepRigWith(t, func(dsn string) (*pgjournal.Store, error) {
		pc, err := pgxpool.ParseConfig(dsn)
		require.NoError(t, err)
		pc.MaxConns = 1
		pool, err = pgxpool.NewWithConfig(ctx, pc)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pgjournal.New(pool, pgjournal.WithCallTimeout(time.Second))
	})

	done := make(chan error, 1)
	go func() {
		_, err := store.Update(ctx, "acct", "k", func(r *journal.Record) error {
			r.Review = "cut"
			return nil
		})
		done <- err
	}()
	cut := backendWaiting(t, admin, "COMMIT", "SyncRep")
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Update() did not return once its COMMIT was cut")
	}
	t.Logf("Update(): %v", err)
	require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Update() cut while its COMMIT waited")

	// The waiting backend commits and answers now, to a connection that
	// must be gone from the pool.
	syncStandby(t, admin, "")
	var pid int32
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	require.NotEqual(t, cut, pid, "the pool's connection after the cut COMMIT")

	r, err := store.Update(ctx, "acct", "k", func(r *journal.Record) error {
		require.Equal(t, "cut", r.Review, "the cut write, committed locally")
		r.Review = "after"
		return nil
	})
	require.NoError(t, err, "Update() after the cut one")
	require.Equal(t, "after", r.Review)
	got, err := store.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Equal(t, "after", got.Review)
}
