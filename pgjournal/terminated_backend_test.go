package pgjournal_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// A failover stops the old primary (Patroni and pg_ctl stop -m fast send
// every backend SIGTERM, as pg_terminate_backend does to one): a backend
// whose transaction has not reached its COMMIT answers FATAL 57P01
// admin_shutdown and rolls back; one already waiting, committed locally,
// for a synchronous standby's confirmation sends only a WARNING and drops
// the connection, since it can neither report the commit nor deny it
// (PostgreSQL's src/backend/replication/syncrep.c, SyncRepWaitForLSN).
// These tests terminate the journal's backend at each of the two points.

// backendWaiting polls admin until a backend other than admin's own waits
// on wait (a pg_stat_activity wait_event_type or wait_event) in a
// statement whose text holds text, and returns its pid.
func backendWaiting(t *testing.T, admin *pgx.Conn, text, wait string) int32 {
	t.Helper()
	ctx := context.Background()
	var pid int32
	require.Eventually(t, func() bool {
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND (wait_event_type = $1 OR wait_event = $1) AND query LIKE '%' || $2 || '%'
			LIMIT 1`, wait, text).Scan(&pid)
		return err == nil
	}, 20*time.Second, 5*time.Millisecond, "a journal backend waiting on %s", wait)
	return pid
}

func terminate(t *testing.T, admin *pgx.Conn, pid int32) {
	t.Helper()
	var ok bool
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
	require.True(t, ok, "pg_terminate_backend(%d)", pid)
}

// TestTerminatedBeforeCommit: the journal's backend terminated while its
// write waits for a lock (a migration's ALTER TABLE holds the table, or
// another transaction the row, as the primary is stopped), before the
// COMMIT was sent: the server's FATAL 57P01 says the write was rolled
// back, so the Store reports a plain error, not journal.ErrMaybeCommitted,
// and the client tells the Submit nothing was journaled and sends
// nothing. Nothing was written. A round of several writers so terminated
// is made again, each write once.
func TestTerminatedBeforeCommit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	c := newClient(t, s, srv)
	admin, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	migration, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	defer migration.Close(ctx)

	lock := func() pgx.Tx {
		tx, err := migration.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{s.Schema(), "records"}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)
		return tx
	}

	t.Run("Create", func(t *testing.T) {
		tx := lock()
		done := make(chan error, 1)
		go func() {
			_, err := s.Create(ctx, journaltest.NewRecord("acct", "created", time.Now()))
			done <- err
		}()
		terminate(t, admin, backendWaiting(t, admin, s.Schema(), "Lock"))
		requireRolledBack(t, <-done, "Create()")
		require.NoError(t, tx.Rollback(ctx))
		_, err = s.Get(ctx, "acct", "created")
		require.ErrorIs(t, err, journal.ErrNotFound, "the write the server rolled back")
	})

	t.Run("Update", func(t *testing.T) {
		// A row another transaction holds: the UPDATE waits in the
		// batch, its statements prepared.
		mustCreate(t, s, "k")
		locker := lockRows(t, s, "acct", "k")
		done := make(chan error, 1)
		go func() {
			_, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error {
				r.Review = "terminated"
				return nil
			})
			done <- err
		}()
		terminate(t, admin, backendWaiting(t, admin, s.Schema(), "Lock"))
		requireRolledBack(t, <-done, "Update()")
		locker.release()
		r, err := s.Get(ctx, "acct", "k")
		require.NoError(t, err)
		require.Empty(t, r.Review, "the write the server rolled back")
	})

	t.Run("round of several writes", func(t *testing.T) {
		// Six writes in one transaction; the backend is terminated while
		// its UPDATE of u1 waits for the row. The committer runs each
		// again alone: made once each, none reported maybe committed.
		mustCreate(t, s, "u1", "u2", "u3")
		locker := lockRows(t, s, "acct", "u1")
		g := holdRound(t, s)
		errs := make(chan error, 6)
		for _, k := range []string{"u1", "u2", "u3"} {
			go func() {
				_, err := s.Update(ctx, "acct", k, func(r *journal.Record) error {
					r.Review += "x"
					return nil
				})
				errs <- err
			}()
		}
		for _, k := range []string{"c1", "c2", "c3"} {
			go func() {
				_, err := s.Create(ctx, journaltest.NewRecord("acct", k, time.Now()))
				errs <- err
			}()
		}
		g.queued(6)
		close(g.open)
		require.NoError(t, <-g.done, "gate's Update()")
		before := pgjournal.CommitterRounds(s)
		terminate(t, admin, backendWaiting(t, admin, s.Schema(), "Lock"))
		locker.release()
		for range 6 {
			require.NoError(t, <-errs, "a write of the round the server rolled back, made again")
		}
		require.Greater(t, pgjournal.CommitterRounds(s)-before, int64(1), "the writes made again, each alone")
		for _, k := range []string{"u1", "u2", "u3"} {
			r, err := s.Get(ctx, "acct", k)
			require.NoError(t, err)
			require.Equal(t, "x", r.Review, "%s changed once", k)
		}
		for _, k := range []string{"c1", "c2", "c3"} {
			_, err := s.Get(ctx, "acct", k)
			require.NoError(t, err, "%s created", k)
		}
	})

	t.Run("Submit", func(t *testing.T) {
		tx := lock()
		done := make(chan error, 1)
		go func() {
			_, err := c.Submit(ctx, order(srv, "submitted"))
			done <- err
		}()
		terminate(t, admin, backendWaiting(t, admin, s.Schema(), "Lock"))
		err := <-done
		t.Logf("Submit(): %v", err)
		require.Error(t, err)
		require.False(t, errors.Is(err, idem.ErrUnknownOutcome), "nothing was journaled: %v", err)
		require.NoError(t, tx.Rollback(ctx))
		_, err = s.Get(ctx, idem.DefaultScope, "submitted")
		require.ErrorIs(t, err, journal.ErrNotFound, "the operation the server rolled back")
		require.Empty(t, requestsFor(srv, "submitted"), "requests of an operation never journaled")
	})
}

// requireRolledBack: err, the error of the call what names, is the
// server's FATAL 57P01, a plain error saying the write was not made.
func requireRolledBack(t *testing.T, err error, what string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "%s whose backend was terminated", what)
	require.Equal(t, "57P01", pgErr.Code, "admin_shutdown")
	require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s rolled back before its COMMIT", what)
}

// TestTerminatedInSyncRepWait: the journal's backend terminated while its
// COMMIT waits for a synchronous standby (the primary stopped for a
// failover while its standby lags): the commit is made locally, and the
// server drops the connection with a WARNING only. The Store reports
// journal.ErrMaybeCommitted, the client tells the Submit the outcome is
// unknown and sends nothing, and the write is there once read again.
func TestTerminatedInSyncRepWait(t *testing.T) {
	ctx := context.Background()
	// The rig's bound on the Store's calls only shortens the client's
	// Release of the lease its create may have taken, which waits for
	// the standby too.
	store, srv, c, admin := startSyncRepRig(t, "")

	err, submitErr := endSyncRepWaits(t, store, c, srv, admin, "terminated in commit", func(pid int32) { terminate(t, admin, pid) })
	require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Update() whose backend was terminated after its local commit")
	require.ErrorIs(t, submitErr, idem.ErrUnknownOutcome, "Submit() whose journal write was committed locally, unconfirmed")
	require.Empty(t, requestsFor(srv, "sent"), "requests of an operation whose journal write is unconfirmed")

	syncStandby(t, admin, "")
	r, err := store.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Equal(t, "terminated in commit", r.Review, "the write committed before its backend was terminated")
	_, err = store.Get(ctx, idem.DefaultScope, "sent")
	require.NoError(t, err, "the operation committed before its backend was terminated")
}

// endSyncRepWaits makes two writes on the rig of startSyncRepRig, each
// ended by end(pid) once its COMMIT waits for the standby: an Update of
// the record "k" of scope "acct" setting its Review to review, then
// c's Submit of the order "sent"; it returns their errors.
func endSyncRepWaits(t *testing.T, store *pgjournal.Store, c *idem.Client, srv *idemtest.Server, admin *pgx.Conn, review string, end func(pid int32)) (updateErr, submitErr error) {
	t.Helper()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := store.Update(ctx, "acct", "k", func(r *journal.Record) error {
			r.Review = review
			return nil
		})
		done <- err
	}()
	end(backendWaiting(t, admin, "COMMIT", "SyncRep"))
	updateErr = <-done
	t.Logf("Update(): %v", updateErr)
	go func() {
		_, err := c.Submit(ctx, order(srv, "sent"))
		done <- err
	}()
	end(backendWaiting(t, admin, "COMMIT", "SyncRep"))
	submitErr = <-done
	t.Logf("Submit(): %v", submitErr)
	return updateErr, submitErr
}

// syncStandby sets synchronous_standby_names to names and returns once
// commits wait for those standbys (none: once they do not): the reload
// reaches the backends before the checkpointer, which makes commits wait,
// so SHOW alone does not tell. A probe transaction's commit does.
func syncStandby(t *testing.T, admin *pgx.Conn, names string) {
	t.Helper()
	ctx := context.Background()
	_, err := admin.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = '`+names+`'`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	want := names != ""
	// Polled here, not in require.Eventually: its condition runs on a
	// goroutine of its own, where probeWaits's require (t.FailNow) may not
	// be called.
	deadline := time.Now().Add(20 * time.Second)
	for probeWaits(t, admin) != want {
		if time.Now().After(deadline) {
			t.Fatalf("commits wait for a synchronous standby: %v: not so after 20s", want)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// probeWaits commits a transaction on a connection of its own and reports
// whether its commit waited for a synchronous standby; one that does is
// cancelled out of the wait (PostgreSQL then reports it committed).
func probeWaits(t *testing.T, admin *pgx.Conn) bool {
	t.Helper()
	ctx := context.Background()
	probe, err := pgx.Connect(ctx, admin.Config().ConnString())
	require.NoError(t, err)
	defer probe.Close(ctx)
	pid := probe.PgConn().PID()
	done := make(chan error, 1)
	go func() {
		_, err := probe.Exec(ctx, `CREATE TEMP TABLE probe (n int) ON COMMIT DROP`) // a commit that wrote the WAL
		done <- err
	}()
	for {
		select {
		case err := <-done:
			require.NoError(t, err, "probe")
			return false
		default:
		}
		var waiting bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'SyncRep')`,
			int32(pid)).Scan(&waiting))
		if waiting {
			_, err := admin.Exec(ctx, `SELECT pg_cancel_backend($1)`, int32(pid))
			require.NoError(t, err)
			require.NoError(t, <-done, "probe cancelled out of its wait")
			return true
		}
	}
}

// TestCrashOfAnotherBackendInCommit: another backend of the server dies
// (killed by the kernel's OOM killer, say) while the journal's COMMIT
// waits for a synchronous standby, committed locally: the postmaster ends
// every backend at once, each sending only a WARNING (57P02
// crash_shutdown, PostgreSQL's quickdie in src/backend/tcop/postgres.c),
// and recovers from the WAL. The Submit is told the outcome is unknown
// and sends nothing; once the server is back, the operation is there, and
// the same Submit again settles it with one order.
func TestCrashOfAnotherBackendInCommit(t *testing.T) {
	ctx := context.Background()
	store, srv, c, admin := startSyncRepRig(t, "")
	victim, err := pgx.Connect(ctx, admin.Config().ConnString())
	require.NoError(t, err)
	defer victim.Close(ctx)

	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, order(srv, "sent"))
		done <- err
	}()
	backendWaiting(t, admin, "COMMIT", "SyncRep")
	proc, err := os.FindProcess(int(victim.PgConn().PID()))
	require.NoError(t, err)
	require.NoError(t, proc.Kill(), "SIGKILL to another backend")
	err = <-done
	t.Logf("Submit(): %v", err)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose journal write was committed locally when the server crashed")
	require.Empty(t, requestsFor(srv, "sent"), "requests of an operation whose journal write is unconfirmed")

	// Back from recovery; commits no longer wait for the standby.
	var again *pgx.Conn
	require.Eventually(t, func() bool {
		again, err = pgx.Connect(ctx, admin.Config().ConnString())
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "the server back from crash recovery: %v", err)
	defer again.Close(ctx)
	syncStandby(t, again, "")
	var rec *journal.Record
	require.Eventually(t, func() bool {
		rec, err = store.Get(ctx, idem.DefaultScope, "sent")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the operation read back after recovery: %v", err)
	require.Equal(t, journal.StatePending, rec.State)

	res, err := c.Submit(ctx, order(srv, "sent"))
	require.NoError(t, err, "the same Submit again")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, srv.Effects("", "sent"), "orders for the operation")
}
