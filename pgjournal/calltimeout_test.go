package pgjournal_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// shortBound is the call timeout of the tests that need the Store's bound
// to end a call while it waits for a row lock: shorter than the 5 s a
// lock wait may last, so that the bound, not lock_timeout, ends it.
const shortBound = time.Second

// cutCalls are the Store's writes of one leased record, "k" (lease l), and
// of a key another transaction is inserting, "inserting": each writes
// nothing unless its COMMIT is sent.
func cutCalls(s *pgjournal.Store, l journal.Lease) map[string]func(ctx context.Context) error {
	now := time.Now().UTC()
	return map[string]func(ctx context.Context) error{
		"Update()": func(ctx context.Context) error {
			_, err := s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
				r.Review = "cut"
				return nil
			})
			return err
		},
		"Claim()": func(ctx context.Context) error {
			_, _, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
			return err
		},
		"Renew()": func(ctx context.Context) error {
			_, err := s.Renew(ctx, l, l.Expires.Add(time.Hour))
			return err
		},
		"Release()": func(ctx context.Context) error { return s.Release(ctx, l) },
		"CreateClaimed()": func(ctx context.Context) error {
			rec := journaltest.NewRecord("acct", "inserting", now)
			rec.Created = now
			_, _, err := s.CreateClaimed(ctx, rec, "b", now.Add(time.Minute))
			return err
		},
	}
}

// requireNotWritten checks err, that of a call cut before its COMMIT was
// sent: the Store's deadline, said by name, and not ambiguous.
func requireNotWritten(t *testing.T, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, context.DeadlineExceeded, "%s cut", what)
	require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s cut before its COMMIT was sent: nothing can have committed", what)
	require.ErrorContains(t, err, "WithCallTimeout", "%s cut", what)
	require.ErrorContains(t, err, "nothing was written", "%s cut", what)
}

// requireUntouched checks, once the lock is gone, that the cut calls made
// nothing: "k" is as it was, under lease l, and "inserting" is not stored.
func requireUntouched(t *testing.T, s *pgjournal.Store, l journal.Lease) {
	t.Helper()
	ctx := context.Background()
	r, err := s.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Empty(t, r.Review, "a write cut before its COMMIT was made")
	_, err = s.Get(ctx, "acct", "inserting")
	require.ErrorIs(t, err, journal.ErrNotFound, "a create cut before its COMMIT")
	// The lease is as it was: its holder renews it, another owner cannot
	// claim it.
	_, err = s.Renew(ctx, l, l.Expires.Add(time.Minute))
	require.NoError(t, err, "Renew() of the lease after the cut calls")
	now := time.Now()
	_, _, err = s.Claim(ctx, "acct", "k", "b", now, now.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "another owner's Claim() after the cut calls")
}

// TestLockWaitCutNotWritten: a write whose call's bound (WithCallTimeout)
// ends while its statement waits for a row another transaction holds
// locked never sent its COMMIT, so nothing can have committed: it fails
// with an error that says so (context.DeadlineExceeded, not
// journal.ErrMaybeCommitted), and indeed wrote nothing.
func TestLockWaitCutNotWritten(t *testing.T) {
	ctx := context.Background()
	s := openStoreWith(t, nil, pgjournal.WithCallTimeout(shortBound))
	now := time.Now().UTC()
	mustCreate(t, s, "k")
	_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	locker := lockRows(t, s, "acct", "k", "inserting")
	forever := context.WithoutCancel(ctx)
	for what, call := range cutCalls(s, l) {
		err := <-within(t, lockWaitBound, what, func() error { return call(forever) })
		t.Logf("%s: %v", what, err)
		requireNotWritten(t, err, what)
	}
	locker.release()
	requireUntouched(t, s, l)
}

// TestPoolWaitCutNotWritten: a write whose call's bound ends while it
// waits for a connection of the pool (every one busy) sent nothing: it
// fails saying so, not journal.ErrMaybeCommitted, and wrote nothing.
func TestPoolWaitCutNotWritten(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, func(pc *pgxpool.Config) { pc.MaxConns = 1 })
	schema := openStore(t).Schema() // migrated, dropped at cleanup
	s, err := pgjournal.New(pool, pgjournal.WithSchema(schema), pgjournal.WithCallTimeout(shortBound))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now().UTC()
	mustCreate(t, s, "k")
	_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)

	held, err := pool.Acquire(ctx) // the pool's only connection
	require.NoError(t, err)
	var once sync.Once
	release := func() { once.Do(held.Release) }
	defer release() // before the pool's cleanup, which waits for it
	forever := context.WithoutCancel(ctx)
	for what, call := range cutCalls(s, l) {
		err := <-within(t, lockWaitBound, what, func() error { return call(forever) })
		t.Logf("%s: %v", what, err)
		requireNotWritten(t, err, what)
	}
	release()
	requireUntouched(t, s, l)
}

// TestLockWaitCutSubmit: through the client at its default settings, a
// Submit whose create waits for a key another transaction is inserting
// (an outbox transaction not committed yet) until the Store's bound ends
// it is told that nothing was journaled (not idem.ErrUnknownOutcome) and
// nothing is sent; once that transaction rolls back, the same Submit
// settles the operation with one request.
func TestLockWaitCutSubmit(t *testing.T) {
	ctx := context.Background()
	s := openStoreWith(t, nil, pgjournal.WithCallTimeout(shortBound))
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	c := newClient(t, s, srv)
	locker := lockRows(t, s, idem.DefaultScope, "k")

	err = <-within(t, lockWaitBound, "Submit()", func() error {
		_, err := c.Submit(ctx, order(srv, "k"))
		return err
	})
	t.Logf("Submit(): %v", err)
	require.Error(t, err, "Submit() of a key being inserted")
	require.NotErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() cut before its COMMIT: nothing journaled")
	require.NotErrorIs(t, err, journal.ErrMaybeCommitted)
	require.ErrorContains(t, err, "nothing was journaled")
	require.Empty(t, requestsFor(srv, "k"), "requests of an operation not journaled")

	locker.release()
	res, err := c.Submit(ctx, order(srv, "k"))
	require.NoError(t, err, "Submit() once the lock is gone")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, submits(srv, "k"), "submits")
}

// commitMuter, once armed, lets the COMMIT of the connection that sent
// marker through to the server and then keeps every answer from the
// client: the server commits, and the client hears nothing until its
// bound ends the call.
type commitMuter struct {
	net.Conn
	marker []byte
	armed  *atomic.Bool
	seen   bool // the marker went out on this connection
	muted  bool
	// committed is closed once the server answered the muted COMMIT.
	committed chan struct{}
}

func (m *commitMuter) Write(b []byte) (int, error) {
	if bytes.Contains(b, m.marker) && m.armed.Load() {
		m.seen = true
	}
	if m.seen && !m.muted && bytes.Contains(b, []byte("COMMIT")) && m.armed.CompareAndSwap(true, false) {
		m.muted = true
	}
	return m.Conn.Write(b)
}

func (m *commitMuter) Read(p []byte) (int, error) {
	if !m.muted {
		return m.Conn.Read(p)
	}
	for {
		n, err := m.Conn.Read(p)
		if n > 0 && bytes.Contains(p[:n], []byte("COMMIT")) {
			select {
			case <-m.committed:
			default:
				close(m.committed)
			}
		}
		if err != nil {
			return 0, err // the client's deadline, at last
		}
	}
}

// TestCallTimeoutMessages: the error of a call the Store's bound ended
// names WithCallTimeout and says what happened and what follows: cut
// before its COMMIT was sent, that nothing was written and the operation
// stays journaled as it was, for Run to settle; cut after, that the write
// may or may not be committed, that the operation stays journaled either
// way, and that Run settles it.
func TestCallTimeoutMessages(t *testing.T) {
	ctx := context.Background()
	settle := func(r *journal.Record) error {
		r.State, r.Settled = journal.StateSucceeded, time.Now()
		r.Result = &journal.Result{ResourceID: "muted"}
		return nil
	}
	t.Run("before COMMIT", func(t *testing.T) {
		s := openStoreWith(t, nil, pgjournal.WithCallTimeout(shortBound))
		mustCreate(t, s, "k")
		locker := lockRows(t, s, "acct", "k")
		_, err := s.Update(context.WithoutCancel(ctx), "acct", "k", settle)
		t.Logf("Update(): %v", err)
		requireNotWritten(t, err, "Update()")
		msg := err.Error()
		require.Contains(t, msg, "stays journaled", "what becomes of the operation")
		require.Contains(t, msg, "Run settles it", "what to do")
		require.Equal(t, 1, strings.Count(msg, "pgjournal: "), "%q names the package once", msg)
		locker.release()
	})
	t.Run("after COMMIT", func(t *testing.T) {
		var armed atomic.Bool
		committed := make(chan struct{})
		s := openStoreWith(t, func(pc *pgxpool.Config) {
			wrapDial(pc, func(c net.Conn) net.Conn {
				return &commitMuter{Conn: c, marker: []byte("muted"), armed: &armed, committed: committed}
			})
		}, pgjournal.WithCallTimeout(shortBound))
		mustCreate(t, s, "k")
		armed.Store(true)
		_, err := s.Update(context.WithoutCancel(ctx), "acct", "k", settle)
		t.Logf("Update(): %v", err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, journal.ErrMaybeCommitted, "cut after its COMMIT was sent")
		msg := err.Error()
		for _, want := range []string{"WithCallTimeout", "may or may not", "stays journaled", "Run settles it"} {
			require.Contains(t, msg, want, "the message")
		}
		require.NotContains(t, msg, "timeout: context deadline exceeded", "pgx's words for it")
		select {
		case <-committed:
		case <-time.After(time.Minute):
			t.Fatal("the server never answered the COMMIT")
		}
		r, err := s.Get(ctx, "acct", "k")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, r.State, "the write whose COMMIT the server answered")
	})
}
