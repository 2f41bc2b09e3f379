package pgjournal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mustCreate(t *testing.T, s *pgjournal.Store, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, err := s.Create(context.Background(), journaltest.NewRecord("acct", k, t0))
		require.NoError(t, err, "Create(%s)", k)
	}
}

// gate holds the committer's next round, led by an Update of "gate"
// whose function waits, so that the writes started meanwhile queue for
// the round after it: one transaction. open lets the round go on and
// returns once the gate's write is answered.
type gate struct {
	t    *testing.T
	s    *pgjournal.Store
	open chan struct{}
	done chan error
}

func holdRound(t *testing.T, s *pgjournal.Store) *gate {
	t.Helper()
	if _, err := s.Create(context.Background(), journaltest.NewRecord("acct", "gate", t0)); !errors.Is(err, journal.ErrExists) {
		require.NoError(t, err, "Create(gate)")
	}
	g := &gate{t: t, s: s, open: make(chan struct{}), done: make(chan error, 1)}
	entered := make(chan struct{})
	go func() {
		_, err := s.Update(context.Background(), "acct", "gate", func(r *journal.Record) error {
			select {
			case <-entered:
			default:
				close(entered)
			}
			<-g.open
			r.Review = "gate"
			return nil
		})
		g.done <- err
	}()
	<-entered
	return g
}

// queued waits until n writes wait for the next round.
func (g *gate) queued(n int) {
	g.t.Helper()
	require.Eventually(g.t, func() bool { return pgjournal.CommitterQueued(g.s) == n }, 10*time.Second, time.Millisecond,
		"%d writes queued behind the gate", n)
}

// release lets the held round end and returns how many transactions the
// committer began from then until every write started returned (wait).
func (g *gate) release(wait func()) int64 {
	g.t.Helper()
	before := pgjournal.CommitterRounds(g.s)
	close(g.open)
	require.NoError(g.t, <-g.done, "gate's Update()")
	wait()
	return pgjournal.CommitterRounds(g.s) - before
}

// settleFn settles the record it is given.
func settleFn(r *journal.Record) error {
	r.State, r.Settled = journal.StateSucceeded, t0
	return nil
}

// TestCommitterSharesOneTransaction: writes queued while a round runs
// are made in one transaction, and each gets its own answer: created,
// created leased, updated, refused for a stale lease (its function not
// called), failed by its function, or not made for a context that ended
// while it waited.
func TestCommitterSharesOneTransaction(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	mustCreate(t, s, "u1", "u2", "stale", "fnerr", "cancelled")
	_, stale, err := s.Claim(ctx, "acct", "stale", "a", t0, t0.Add(time.Minute))
	require.NoError(t, err)
	_, _, err = s.TakeOver(ctx, "acct", "stale", "b", t0, t0.Add(time.Minute))
	require.NoError(t, err)
	before := map[string]*journal.Record{}
	for _, k := range []string{"stale", "fnerr", "cancelled"} {
		before[k], err = s.Get(ctx, "acct", k)
		require.NoError(t, err)
	}

	g := holdRound(t, s)
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	start := func(key string, write func() error) {
		wg.Go(func() {
			err := write()
			mu.Lock()
			errs[key] = err
			mu.Unlock()
		})
	}
	staleCalled := atomic.Bool{}
	cctx, cancel := context.WithCancel(ctx)
	start("cancelled", func() error {
		_, err := s.Update(cctx, "acct", "cancelled", settleFn)
		return err
	})
	g.queued(1)
	cancel()
	g.queued(0) // it leaves the queue at once
	start("new1", func() error {
		_, err := s.Create(ctx, journaltest.NewRecord("acct", "new1", t0))
		return err
	})
	var lease journal.Lease
	start("new2", func() error {
		var err error
		_, lease, err = s.CreateClaimed(ctx, journaltest.NewRecord("acct", "new2", t0), "a", t0.Add(time.Minute))
		return err
	})
	start("u1", func() error {
		_, err := s.Update(ctx, "acct", "u1", settleFn)
		return err
	})
	start("u2", func() error {
		_, err := s.Update(ctx, "acct", "u2", func(r *journal.Record) error {
			r.Review = "looked at"
			return nil
		})
		return err
	})
	start("stale", func() error {
		_, err := s.Update(journal.WithLease(ctx, stale), "acct", "stale", func(r *journal.Record) error {
			staleCalled.Store(true)
			return settleFn(r)
		})
		return err
	})
	errFn := errors.New("fn refuses")
	start("fnerr", func() error {
		_, err := s.Update(ctx, "acct", "fnerr", func(r *journal.Record) error {
			r.Review = "must not stay"
			return errFn
		})
		return err
	})
	g.queued(6)
	require.Equal(t, int64(1), g.release(wg.Wait), "transactions of 6 queued writes")

	for _, k := range []string{"new1", "new2", "u1", "u2"} {
		require.NoError(t, errs[k], "write of %s", k)
	}
	require.ErrorIs(t, errs["cancelled"], context.Canceled, "write whose context ended while queued")
	require.ErrorIs(t, errs["stale"], journal.ErrLeaseLost, "write under a stale lease")
	require.False(t, staleCalled.Load(), "fn called under a stale lease")
	require.ErrorIs(t, errs["fnerr"], errFn, "write whose fn fails")
	for k, want := range before {
		got, err := s.Get(ctx, "acct", k)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s after its refused write", k)
	}
	u1, err := s.Get(ctx, "acct", "u1")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, u1.State)
	u2, err := s.Get(ctx, "acct", "u2")
	require.NoError(t, err)
	require.Equal(t, "looked at", u2.Review)
	_, held, err := s.Claim(ctx, "acct", "new2", "b", t0, t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() of the record created leased")
	require.Equal(t, journal.Lease{Scope: "acct", Key: "new2", Owner: "a", Token: 1, Expires: t0.Add(time.Minute)}, lease, "the created lease")
	require.Equal(t, lease.Token, held.Token, "the holder's token")
	require.Equal(t, lease.Owner, held.Owner, "the holder")
	// Its end in the claimant's clock: what is left of its minute.
	require.WithinRange(t, held.Expires, t0, lease.Expires, "the holder's expiry")
}

// TestCommitterStatementAbort: a statement the server refuses aborts the
// shared transaction; the writes of its round are then made one by one,
// and only the refused ones fail, with the server's error (not "maybe
// committed": nothing of them was).
func TestCommitterStatementAbort(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	admin, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Exec(ctx, `ALTER TABLE `+pgx.Identifier{s.Schema(), "records"}.Sanitize()+
		` ADD CONSTRAINT poison CHECK (key NOT LIKE 'poison%' OR open)`)
	require.NoError(t, err)
	mustCreate(t, s, "poison-u", "fine-u")

	g := holdRound(t, s)
	var wg sync.WaitGroup
	errs := make(map[string]error)
	var mu sync.Mutex
	for _, k := range []string{"poison-c", "fine-c"} {
		wg.Go(func() {
			rec := journaltest.NewRecord("acct", k, t0)
			_ = settleFn(rec)
			_, err := s.Create(ctx, rec)
			mu.Lock()
			errs[k] = err
			mu.Unlock()
		})
	}
	for _, k := range []string{"poison-u", "fine-u"} {
		wg.Go(func() {
			_, err := s.Update(ctx, "acct", k, settleFn)
			mu.Lock()
			errs[k] = err
			mu.Unlock()
		})
	}
	g.queued(4)
	// The shared transaction, then one per write.
	require.Equal(t, int64(5), g.release(wg.Wait), "transactions")

	for _, k := range []string{"poison-c", "poison-u"} {
		var pgErr *pgconn.PgError
		require.ErrorAs(t, errs[k], &pgErr, "write of %s", k)
		require.Equal(t, "23514", pgErr.Code, "write of %s: check violation", k)
		require.NotErrorIs(t, errs[k], journal.ErrMaybeCommitted, "write of %s", k)
	}
	_, err = s.Get(ctx, "acct", "poison-c")
	require.ErrorIs(t, err, journal.ErrNotFound, "refused create")
	r, err := s.Get(ctx, "acct", "poison-u")
	require.NoError(t, err)
	require.True(t, r.Open(), "refused update")
	for _, k := range []string{"fine-c", "fine-u"} {
		require.NoError(t, errs[k], "write of %s", k)
		r, err := s.Get(ctx, "acct", k)
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, r.State, "%s", k)
	}
}

// cutConn closes its connection, once armed, right after it has sent bytes
// holding marker (the batch of a transaction's statements: the server
// has them all, and not the COMMIT), or with inCommit, after the COMMIT
// that follows them: the client never hears back.
type cutConn struct {
	net.Conn
	marker   []byte
	armed    *atomic.Bool
	inCommit bool
	seen     bool // the marker went out on this connection
}

func (c *cutConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if bytes.Contains(b, c.marker) && c.armed.Load() {
		c.seen = true
	}
	if c.seen && (!c.inCommit || bytes.Contains(b, []byte("COMMIT"))) && c.armed.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
	}
	return n, err
}

// TestCommitterConnectionCut: the connection breaks after a shared
// transaction's statements were sent. Before its COMMIT was sent, every
// write of it is told it was not written (none a success, none
// journal.ErrMaybeCommitted), and none was. While its COMMIT was in
// flight, every write is told journal.ErrMaybeCommitted (none a success,
// none a plain failure), and the transaction took effect whole or not at
// all.
func TestCommitterConnectionCut(t *testing.T) {
	for _, inCommit := range []bool{false, true} {
		name := map[bool]string{false: "before COMMIT", true: "in COMMIT"}[inCommit]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			s := openStoreWrapping(t, func(c net.Conn) net.Conn {
				return &cutConn{Conn: c, marker: []byte("cut-here"), armed: &armed, inCommit: inCommit}
			})
			mustCreate(t, s, "u1")

			g := holdRound(t, s)
			armed.Store(true)
			var wg sync.WaitGroup
			errs := make(map[string]error)
			var mu sync.Mutex
			record := func(k string, err error) {
				mu.Lock()
				errs[k] = err
				mu.Unlock()
			}
			for _, k := range []string{"cut-here", "c2"} {
				wg.Go(func() {
					_, err := s.Create(ctx, journaltest.NewRecord("acct", k, t0))
					record(k, err)
				})
			}
			wg.Go(func() {
				_, _, err := s.CreateClaimed(ctx, journaltest.NewRecord("acct", "c3", t0), "a", t0.Add(time.Minute))
				record("c3", err)
			})
			wg.Go(func() {
				_, err := s.Update(ctx, "acct", "u1", settleFn)
				record("u1", err)
			})
			g.queued(4)
			require.Equal(t, int64(1), g.release(wg.Wait), "transactions")
			require.False(t, armed.Load(), "the connection was cut")

			for k, err := range errs {
				if inCommit {
					require.ErrorIs(t, err, journal.ErrMaybeCommitted, "write of %s", k)
				} else {
					require.Error(t, err, "write of %s", k)
					require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "write of %s cut before its COMMIT", k)
				}
			}
			// All or nothing, in one snapshot (List is one statement): the
			// server may still be committing while the client has given up.
			all, err := s.List(ctx, journal.Filter{})
			require.NoError(t, err)
			made := map[string]bool{}
			for _, r := range all {
				made[r.Key] = r.Key != "u1" || r.State == journal.StateSucceeded
			}
			require.True(t, made["cut-here"] == made["c2"] && made["c2"] == made["c3"] && made["c3"] == made["u1"], "writes made: %v", made)
			if !inCommit {
				require.False(t, made["u1"], "writes made before the COMMIT was sent: %v", made)
			}
		})
	}
}

// TestCommitterCallerPanicsAndExits: a panic in one writer's function is
// raised in that writer, and the other writes of its round are made; a
// runtime.Goexit in one (t.FailNow in a test) fails the writes of its
// round that were not answered, writes nothing of them, and leaves the
// committer working.
func TestCommitterCallerPanicsAndExits(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	mustCreate(t, s, "p", "ok", "x", "w", "after")

	g := holdRound(t, s)
	var wg sync.WaitGroup
	var panicked any
	var okErr error
	wg.Go(func() {
		defer func() { panicked = recover() }()
		_, _ = s.Update(ctx, "acct", "p", func(*journal.Record) error { panic("caller's bug") })
	})
	wg.Go(func() { _, okErr = s.Update(ctx, "acct", "ok", settleFn) })
	g.queued(2)
	require.Equal(t, int64(1), g.release(wg.Wait), "transactions")
	require.Equal(t, "caller's bug", panicked, "panic raised in its writer")
	require.NoError(t, okErr, "write sharing a round with a panic")

	// The oldest queued write leads the next round: its function exits
	// the leader's goroutine before the other's is applied.
	g = holdRound(t, s)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_, _ = s.Update(ctx, "acct", "x", func(*journal.Record) error {
			runtime.Goexit()
			return nil
		})
	}()
	g.queued(1)
	var wErr error
	wg.Go(func() { _, wErr = s.Update(ctx, "acct", "w", settleFn) })
	g.queued(2)
	g.release(wg.Wait)
	<-exited
	require.ErrorIs(t, wErr, pgjournal.ErrGoexit, "write of a round whose leader exited")
	w, err := s.Get(ctx, "acct", "w")
	require.NoError(t, err)
	require.True(t, w.Open(), "nothing of the round written")
	_, err = s.Update(ctx, "acct", "after", settleFn)
	require.NoError(t, err, "write after the exit")
}

// bigRecord is a pending record with a body of n bytes.
func bigRecord(key string, n int) *journal.Record {
	r := journaltest.NewRecord("acct", key, t0)
	r.Body = bytes.Repeat([]byte("x"), n)
	r.BodySHA = sha256.Sum256(r.Body)
	return r
}

// TestCommitterBoundsTransactionBytes: a round whose records outweigh
// one transaction's budget (4 MiB) is written in several, each write
// still answered once, and all made.
func TestCommitterBoundsTransactionBytes(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	const mib = 1 << 20
	_, err := s.Create(ctx, bigRecord("big-u", mib))
	require.NoError(t, err)

	g := holdRound(t, s)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range 5 {
		wg.Go(func() {
			_, errs[i] = s.Create(ctx, bigRecord(fmt.Sprintf("big-%d", i), mib))
		})
	}
	wg.Go(func() { _, errs[5] = s.Update(ctx, "acct", "big-u", settleFn) })
	g.queued(6)
	// About 6 MiB of records: two transactions.
	require.Equal(t, int64(2), g.release(wg.Wait), "transactions")
	for i, err := range errs {
		require.NoError(t, err, "write %d", i)
	}
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Len(t, all, 7, "records") // with the gate
	u, err := s.Get(ctx, "acct", "big-u")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, u.State)
}
