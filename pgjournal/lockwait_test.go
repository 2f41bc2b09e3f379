package pgjournal_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// lockWaitBound is how long a journal call may wait for a row another
// transaction holds, in these tests: the Store's own bound (5 s) with
// room for a round that waits twice (its shared transaction, then the
// write alone).
const lockWaitBound = 20 * time.Second

// rowLocker holds row locks in a transaction of its own, as an operator's
// forgotten psql session or an application's long transaction would.
type rowLocker struct {
	tx    pgx.Tx
	table string
}

// lockRows begins a transaction on its own connection and locks the
// records of keys in scope (FOR UPDATE), or, for keys not stored, inserts
// them without committing; it rolls back at cleanup unless release was
// called.
func lockRows(t *testing.T, s *pgjournal.Store, scope string, keys ...string) *rowLocker {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	l := &rowLocker{tx: tx, table: pgx.Identifier{s.Schema(), "records"}.Sanitize()}
	t.Cleanup(l.release)
	for _, k := range keys {
		tag, err := tx.Exec(ctx, `SELECT 1 FROM `+l.table+` WHERE scope = $1 AND key = $2 FOR UPDATE`, scope, k)
		require.NoError(t, err)
		if tag.RowsAffected() == 1 {
			continue
		}
		// Not stored: inserted, uncommitted (an outbox transaction).
		_, err = tx.Exec(ctx, `INSERT INTO `+l.table+` (scope, key, state, open, review, created_ns, next_due_ns, settled_ns, data)
			VALUES ($1, $2, 'pending', true, false, 0, 0, 0, '')`, scope, k)
		require.NoError(t, err)
	}
	return l
}

// release rolls the locker's transaction back.
func (l *rowLocker) release() { _ = l.tx.Rollback(context.Background()) }

// within runs call and fails the test if it has not returned within d;
// it returns call's error.
func within(t *testing.T, d time.Duration, what string, call func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	out := make(chan error, 1)
	go func() {
		select {
		case err := <-done:
			out <- err
		case <-time.After(d):
			t.Errorf("%s still waiting for a locked row after %v", what, d)
			out <- errors.New("still waiting")
		}
	}()
	return out
}

// TestRowLockWaitBounded: a journal call that meets a row another
// transaction holds locked (a forgotten psql session, a long outbox
// transaction inserting the same key) waits a bounded time, even with a
// context that never ends (the client makes its journal writes with
// such a context, so that a caller's cancellation never leaves an
// outcome unwritten), then fails with an error that says nothing was
// written; the other writes queued behind it are not held longer; and
// once the lock is gone, nothing was lost and every write can be made.
func TestRowLockWaitBounded(t *testing.T) {
	ctx := context.Background()
	forever := context.WithoutCancel(ctx)
	s := openStore(t)
	now := time.Now().UTC()
	mustCreate(t, s, "claimed", "locked", "free")
	_, l, err := s.Claim(ctx, "acct", "claimed", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	locker := lockRows(t, s, "acct", "claimed", "locked", "inserting")

	begin := time.Now()
	calls := map[string]<-chan error{
		"Claim()": within(t, lockWaitBound, "Claim()", func() error {
			_, _, err := s.Claim(forever, "acct", "locked", "b", now, now.Add(time.Minute))
			return err
		}),
		"Update()": within(t, lockWaitBound, "Update()", func() error {
			_, err := s.Update(journal.WithLease(forever, l), "acct", "claimed", func(r *journal.Record) error {
				r.Review = "outcome"
				return nil
			})
			return err
		}),
		"Renew()": within(t, lockWaitBound, "Renew()", func() error {
			_, err := s.Renew(forever, l, now.Add(time.Hour))
			return err
		}),
		"CreateClaimed()": within(t, lockWaitBound, "CreateClaimed()", func() error {
			rec := journaltest.NewRecord("acct", "inserting", now)
			rec.Created = now
			_, _, err := s.CreateClaimed(forever, rec, "b", now.Add(time.Minute))
			return err
		}),
	}
	for what, done := range calls {
		err := <-done
		require.Error(t, err, "%s of a locked row", what)
		require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s of a locked row: nothing was written", what)
		t.Logf("%s: %v", what, err)
	}
	t.Logf("all returned after %v", time.Since(begin).Round(time.Millisecond))
	// A write of another row, queued behind them, is made.
	err = <-within(t, lockWaitBound, "Update() of another row", func() error {
		_, err := s.Update(forever, "acct", "free", func(r *journal.Record) error {
			r.Review = "made"
			return nil
		})
		return err
	})
	require.NoError(t, err, "Update() of a row no one locks")

	locker.release()
	for _, k := range []string{"claimed", "locked"} {
		r, err := s.Get(ctx, "acct", k)
		require.NoError(t, err, "%s after the lock", k)
		require.True(t, r.Open(), "%s after the lock", k)
		require.Empty(t, r.Review, "%s: a write refused for the lock was made", k)
	}
	_, err = s.Get(ctx, "acct", "inserting")
	require.ErrorIs(t, err, journal.ErrNotFound, "the key the rolled-back transaction inserted")
	_, err = s.Update(journal.WithLease(ctx, l), "acct", "claimed", func(r *journal.Record) error {
		r.Review = "outcome"
		return nil
	})
	require.NoError(t, err, "Update() under the lease once the lock is gone")
	_, _, err = s.Claim(ctx, "acct", "locked", "b", now, now.Add(time.Minute))
	require.NoError(t, err, "Claim() once the lock is gone")
}

// TestRowLockWaitDo: through the client at its default settings, Do of an
// operation whose row another transaction holds locked returns within its
// budget, having sent nothing; once the lock is gone, Do settles it with
// one request.
func TestRowLockWaitDo(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	c := newClient(t, s, srv)
	op, err := c.Prepare(ctx, order(srv, "k"))
	require.NoError(t, err)
	locker := lockRows(t, s, op.Scope, "k")

	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = <-within(t, lockWaitBound, "Do()", func() error {
		_, err := c.Do(dctx, op)
		return err
	})
	require.Error(t, err, "Do() of a locked operation")
	t.Logf("Do(): %v", err)
	require.Empty(t, requestsFor(srv, "k"), "requests while the operation's row was locked")

	locker.release()
	res, err := c.Do(ctx, op)
	require.NoError(t, err, "Do() once the lock is gone")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, submits(srv, "k"), "submits")
	require.Equal(t, 1, srv.Effects("", "k"), "side effects")
}

// TestLockWaitLocal: the bound on lock waits is the journal's
// transactions' own: a pool the application shares with the Store (New)
// keeps its session's lock_timeout.
func TestLockWaitLocal(t *testing.T) {
	ctx := context.Background()
	schema := openStore(t).Schema()
	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	pc.MaxConns = 1 // the Store's statements and the check share one session
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	defer pool.Close()
	s, err := pgjournal.New(pool, pgjournal.WithSchema(schema))
	require.NoError(t, err)
	defer s.Close()
	now := time.Now()
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k", now))
	require.NoError(t, err)
	_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	_, err = s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
		r.Review = "looked at"
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, l))
	var timeout string
	require.NoError(t, pool.QueryRow(ctx, `SHOW lock_timeout`).Scan(&timeout))
	require.Equal(t, "0", timeout, "the session's lock_timeout after the journal's statements")
	require.NoError(t, pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&timeout))
	require.Equal(t, "0", timeout, "the session's idle_in_transaction_session_timeout after the journal's statements")
}

// TestStatementTimeout: a statement the server ends for its
// statement_timeout (a database or role setting) was not committed, and
// says so: a plain error, not journal.ErrMaybeCommitted, and nothing
// written.
func TestStatementTimeout(t *testing.T) {
	ctx := context.Background()
	s := openStoreWith(t, func(pc *pgxpool.Config) { pc.ConnConfig.RuntimeParams["statement_timeout"] = "200ms" })
	now := time.Now()
	mustCreate(t, s, "k")
	_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	locker := lockRows(t, s, "acct", "k")
	_, err = s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
		r.Review = "outcome"
		return nil
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "Update() past the statement timeout")
	require.Equal(t, "57014", pgErr.Code, "query_canceled")
	require.NotErrorIs(t, err, journal.ErrMaybeCommitted)
	locker.release()
	r, err := s.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Empty(t, r.Review, "the write the server ended")
}

// commitFreezer, once armed, holds the COMMIT of the connection that sent
// marker until thaw is closed: a client frozen (its process paused, its
// VM migrated) between its transaction's statements and its COMMIT.
type commitFreezer struct {
	net.Conn
	marker []byte
	armed  *atomic.Bool
	seen   bool
	frozen chan struct{} // closed once the COMMIT is held
	thaw   chan struct{}
}

func (f *commitFreezer) Write(b []byte) (int, error) {
	if bytes.Contains(b, f.marker) && f.armed.Load() {
		f.seen = true
	}
	if f.seen && bytes.Contains(b, []byte("COMMIT")) && f.armed.CompareAndSwap(true, false) {
		close(f.frozen)
		<-f.thaw
	}
	return f.Conn.Write(b)
}

// TestFrozenWriterLocksBounded: a replica frozen between its write's
// statements and its COMMIT holds the rows it wrote locked for at most
// about 5 s (the server then ends its session and rolls the write back),
// not for as long as it stays frozen: another replica takes its lease
// over meanwhile. Thawed, the frozen write fails, was not made, and is not
// reported as made.
func TestFrozenWriterLocksBounded(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	frozen, thaw := make(chan struct{}), make(chan struct{})
	var once sync.Once
	thawed := func() { once.Do(func() { close(thaw) }) }
	s := openStoreWrapping(t, func(c net.Conn) net.Conn {
		return &commitFreezer{Conn: c, marker: []byte("frozen"), armed: &armed, frozen: frozen, thaw: thaw}
	})
	defer thawed() // before the pool's cleanup, which waits for the held connection
	now := time.Now().UTC()
	mustCreate(t, s, "k")
	_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)

	armed.Store(true)
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
			r.Review = "frozen"
			return nil
		})
		wrote <- err
	}()
	select {
	case <-frozen:
	case <-time.After(time.Minute):
		t.Fatal("the write never reached its COMMIT")
	}

	other, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(s.Schema()))
	require.NoError(t, err)
	defer other.Close()
	begin := time.Now()
	deadline := begin.Add(lockWaitBound)
	for {
		now := time.Now()
		_, _, err = other.TakeOver(ctx, "acct", "k", "b", now, now.Add(time.Minute))
		if err == nil || time.Now().After(deadline) {
			break
		}
		t.Logf("TakeOver() after %v: %v", time.Since(begin).Round(time.Millisecond), err)
	}
	require.NoError(t, err, "TakeOver() of a row a frozen writer holds, %v after it froze", time.Since(begin).Round(time.Millisecond))
	t.Logf("taken over %v after the writer froze", time.Since(begin).Round(time.Millisecond))

	thawed()
	err = <-wrote
	t.Logf("the frozen Update(): %v", err)
	require.Error(t, err, "Update() frozen past its session's end")
	r, err := other.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Empty(t, r.Review, "the frozen write was made")
}
