package pgjournal_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestCancelledSyncRepWait: the journal's COMMIT waits for a synchronous
// standby that does not confirm, and an operator (or a tool that cancels
// long queries) cancels it with pg_cancel_backend. PostgreSQL answers the
// COMMIT as made, with only a WARNING, "canceling wait for synchronous
// replication due to user request", DETAIL "The transaction has already
// committed locally, but might not have been replicated to the standby."
// (SyncRepWaitForLSN in src/backend/replication/syncrep.c; the answer
// as psql shows it, "WARNING: 01000: canceling wait ... COMMIT":
// https://paquier.xyz/postgresql-2/track-commit-synchronous).
// A failover to the standby then loses the write: an operation sent, its
// record gone. The write reports that it may have committed
// (journal.ErrMaybeCommitted), the client tells the Submit the outcome is
// unknown and sends nothing, and once the standby confirms the write is
// read back and the same Submit settles it with one order.
//
// The Store hears the WARNING whatever the pool does with notices: on a
// pool given to New with no OnNotice, or with the application's own,
// pgx dropped it, or handed it to the application only, before the Store
// read its COMMIT's answer itself, and the write read as made: the Submit
// sent its order with a record a failover to that standby loses. The
// application's handler still hears the notices. Behind PgBouncer in
// transaction mode, which passes the server's notice on with the COMMIT's
// answer, the Store hears it too.
func TestCancelledSyncRepWait(t *testing.T) {
	// Parallel: it waits on a PostgreSQL of its own (startPrivateServer)
	// and a PgBouncer of its own, idle meanwhile.
	t.Parallel()
	for _, pool := range []string{"Open's", "no OnNotice", "the application's OnNotice", "no OnNotice, behind PgBouncer"} {
		t.Run(pool, func(t *testing.T) {
			ctx := context.Background()
			var heard atomic.Int32
			open := func(dsn string) (*pgjournal.Store, error) {
				if pool == "no OnNotice, behind PgBouncer" {
					cfg, err := pgconn.ParseConfig(dsn)
					require.NoError(t, err)
					dsn = startPgBouncerTo(t, cfg.Host, cfg.Port) + "&default_query_exec_mode=exec"
				}
				pc, err := pgxpool.ParseConfig(dsn)
				require.NoError(t, err)
				if pool == "the application's OnNotice" {
					pc.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
						if n.SeverityUnlocalized == "WARNING" {
							heard.Add(1)
						}
					}
				}
				p, err := pgxpool.NewWithConfig(ctx, pc)
				require.NoError(t, err)
				t.Cleanup(p.Close)
				return pgjournal.New(p, pgjournal.WithCallTimeout(3*time.Second))
			}
			if pool == "Open's" {
				open = func(dsn string) (*pgjournal.Store, error) {
					return pgjournal.Open(ctx, dsn, pgjournal.WithCallTimeout(3*time.Second))
				}
			}
			store, srv, c, admin := startSyncRepRigWith(t, open)
			cancelBackend := func(pid int32) {
				t.Helper()
				var ok bool
				require.NoError(t, admin.QueryRow(ctx, `SELECT pg_cancel_backend($1)`, pid).Scan(&ok))
				require.True(t, ok, "pg_cancel_backend(%d)", pid)
			}

			err, submitErr := endSyncRepWaits(t, store, c, srv, admin, "cancelled in commit", cancelBackend)
			require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Update() whose COMMIT no standby confirmed")
			require.ErrorIs(t, submitErr, idem.ErrUnknownOutcome, "Submit() whose journal write no standby confirmed")
			require.Empty(t, requestsFor(srv, "sent"), "requests of an operation whose journal write no standby confirmed")
			if pool == "the application's OnNotice" {
				require.EqualValues(t, 2, heard.Load(), "WARNINGs the application's OnNotice heard")
			}

			syncStandby(t, admin, "")
			r, err := store.Get(ctx, "acct", "k")
			require.NoError(t, err)
			require.Equal(t, "cancelled in commit", r.Review, "the write committed locally")
			res, err := c.Submit(ctx, order(srv, "sent"))
			require.NoError(t, err, "the same Submit again")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, srv.Effects("", "sent"), "orders for the operation")
		})
	}
}
