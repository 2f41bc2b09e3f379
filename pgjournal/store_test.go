package pgjournal_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
	"github.com/idemkit/idem/pgjournal/internal/pgtest"
)

// dsn is the test server's DSN (pgtest.DSN).
func dsn(t testing.TB) string { return pgtest.DSN(t) }

var schemas atomic.Int64

// openStore opens a Store on a fresh, migrated schema of its own, dropped
// when the test ends.
func openStore(t testing.TB) *pgjournal.Store { return openStoreWith(t, nil) }

// openStoreWith is openStore on a pool whose configuration cfg changes,
// when not nil: the Store then uses a pool of its own (New), which
// cleanup closes. opts are the Store's.
func openStoreWith(t testing.TB, cfg func(*pgxpool.Config), opts ...pgjournal.Option) *pgjournal.Store {
	t.Helper()
	ctx := context.Background()
	schema := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	var s *pgjournal.Store
	var err error
	if cfg == nil {
		s, err = pgjournal.Open(ctx, dsn(t), append(opts, pgjournal.WithSchema(schema))...)
	} else {
		s, err = pgjournal.New(newPool(t, cfg), append(opts, pgjournal.WithSchema(schema))...)
	}
	require.NoError(t, err, "Open()")
	require.NoError(t, s.Migrate(ctx), "Migrate()")
	t.Cleanup(func() {
		admin, err := pgjournal.Open(context.Background(), dsn(t))
		if err == nil {
			_ = admin.DropSchema(context.Background(), schema)
			_ = admin.Close()
		}
	})
	return s
}

// newPool is a pool on the test server whose configuration cfg changes,
// closed when the test ends.
func newPool(t testing.TB, cfg func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	cfg(pc)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// openStoreWrapping is openStore on a pool whose connections to the
// server pass through wrap's: a test's hand on the wire.
func openStoreWrapping(t testing.TB, wrap func(net.Conn) net.Conn) *pgjournal.Store {
	t.Helper()
	return openStoreWith(t, func(pc *pgxpool.Config) { wrapDial(pc, wrap) })
}

// wrapDial makes the connections pc's pool dials pass through wrap's.
func wrapDial(pc *pgxpool.Config, wrap func(net.Conn) net.Conn) {
	var d net.Dialer
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

// TestConformance runs the conformance suite on a Store that judges leases
// by the suite's fixed clock, which jumps past a lease's end at once (see
// journaltest's t0): the database's clock, which a Store judges by
// otherwise, has its own tests (TestLeaseSkewedClocks).
func TestConformance(t *testing.T) {
	journaltest.Run(t, func(t testing.TB) idem.Store {
		s := openStore(t)
		pgjournal.UseCallerClock(s)
		return s
	})
}

func TestMigrateConcurrent(t *testing.T) {
	ctx := context.Background()
	schema := fmt.Sprintf("m%d_%d", os.Getpid(), schemas.Add(1))
	// Looked up here, not in the goroutines: without a server dsn skips
	// (t.SkipNow), which must run on the test's goroutine; called from
	// another it ended only that goroutine, and the test waited for ever
	// on errs.
	d := dsn(t)
	const replicas = 4
	errs := make(chan error, replicas)
	for range replicas {
		go func() {
			s, err := pgjournal.Open(ctx, d, pgjournal.WithSchema(schema))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			errs <- s.Migrate(ctx)
		}()
	}
	for range replicas {
		require.NoError(t, <-errs, "Migrate() by replicas starting at once")
	}
	s, err := pgjournal.Open(ctx, d, pgjournal.WithSchema(schema))
	require.NoError(t, err)
	defer s.Close()
	defer s.DropSchema(ctx, schema)
	require.NoError(t, s.Migrate(ctx), "Migrate() of a migrated schema")
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k", time.Now()))
	require.NoError(t, err, "Create() after concurrent migrations")
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"", "Idem", "a-b", "1abc", "x; DROP TABLE y", `a"b`, "a\x00b"} {
		_, err := pgjournal.Open(ctx, "postgres://u@127.0.0.1:1/db", pgjournal.WithSchema(name))
		require.ErrorIs(t, err, pgjournal.ErrConfig, "WithSchema(%q)", name)
	}
	_, err := pgjournal.Open(ctx, "postgres://user:s3cret@host:notaport/db")
	require.ErrorIs(t, err, pgjournal.ErrConfig, "bad DSN")
	require.NotContains(t, err.Error(), "s3cret", "error quotes the password")
	_, err = pgjournal.New(nil)
	require.ErrorIs(t, err, pgjournal.ErrConfig, "New(nil)")
	for _, d := range []time.Duration{0, -time.Second} {
		_, err = pgjournal.Open(ctx, "postgres://u@127.0.0.1:1/db", pgjournal.WithCallTimeout(d))
		require.ErrorIs(t, err, pgjournal.ErrConfig, "WithCallTimeout(%v)", d)
		require.ErrorContains(t, err, "positive", "WithCallTimeout(%v)", d)
	}
}

func TestNULInFilter(t *testing.T) {
	_, err := openStore(t).List(context.Background(), journal.Filter{Scope: "a\x00b"})
	require.ErrorIs(t, err, journal.ErrInvalid, "List() with a NUL byte in the scope")
}

func TestNotMigrated(t *testing.T) {
	ctx := context.Background()
	s, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(fmt.Sprintf("none%d", os.Getpid())))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "acct", "k")
	require.ErrorIs(t, err, pgjournal.ErrNotMigrated)
}

func TestStats(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Now()
	for _, k := range []string{"a", "b", "c"} {
		_, err := s.Create(ctx, journaltest.NewRecord("acct", k, now))
		require.NoError(t, err)
	}
	_, err := s.Update(ctx, "acct", "b", func(r *journal.Record) error {
		r.State, r.Review = journal.StateUnknown, "key expired"
		return nil
	})
	require.NoError(t, err)
	_, err = s.Resolve(ctx, "acct", "c", journal.Manual{State: journal.StateSucceeded, Reason: "seen", At: now})
	require.NoError(t, err)
	// Settled, but flagged: idem's Stats takes Review from the store for
	// the operations settled so (a charge an event says was declined), and
	// the bbolt journal counts them in every state; so must this one.
	for _, k := range []string{"d", "e"} {
		_, err := s.Create(ctx, journaltest.NewRecord("acct", k, now))
		require.NoError(t, err)
	}
	settle := journal.Confirmation{State: journal.StateSucceeded, Source: "psp", EventID: "paid", At: now}
	_, err = s.Confirm(ctx, "acct", "d", settle)
	require.NoError(t, err)
	_, err = s.Confirm(ctx, "acct", "d", journal.Confirmation{State: journal.StateFailed, Source: "psp", EventID: "declined", At: now})
	require.ErrorIs(t, err, journal.ErrConfirmConflict)
	settle.State = journal.StateFailed
	_, err = s.Confirm(ctx, "acct", "e", settle)
	require.NoError(t, err)
	_, err = s.Confirm(ctx, "acct", "e", journal.Confirmation{State: journal.StateSucceeded, Source: "psp", EventID: "captured", At: now})
	require.ErrorIs(t, err, journal.ErrConfirmConflict)
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[journal.State]int{journal.StatePending: 1, journal.StateUnknown: 1, journal.StateSucceeded: 2, journal.StateFailed: 1}, st.ByState)
	require.Equal(t, 5, st.Total)
	require.Equal(t, 2, st.Open)
	require.Equal(t, 3, st.Review, "the open operation flagged, and the two settled ones a confirmation contradicts")
	require.Positive(t, st.FileSize)
}

// A lease with token 0 is no claim's: Renew and Release refuse it without
// a statement, which would match a row no one ever claimed (its token and
// owner are 0 and "") and set its expiry.
func TestZeroLeaseUnsent(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Now()
	_, err := s.Create(ctx, journaltest.NewRecord("acct", "k", now))
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	defer pool.Close()
	expires := func() int64 {
		t.Helper()
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT lease_expires FROM `+pgx.Identifier{s.Schema(), "records"}.Sanitize()+
			` WHERE scope = 'acct' AND key = 'k'`).Scan(&n))
		return n
	}

	zero := journal.Lease{Scope: "acct", Key: "k"}
	_, err = s.Renew(ctx, zero, now.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrLeaseLost, "Renew(zero lease)")
	require.Zero(t, expires(), "lease_expires of a record never claimed, after Renew(zero lease)")
	require.ErrorIs(t, s.Release(ctx, zero), journal.ErrLeaseLost, "Release(zero lease)")
	require.Zero(t, expires(), "lease_expires after Release(zero lease)")
}

// parseCounter counts, in what its connection sends, the statements
// prepared (Parse messages) whose text holds marker.
type parseCounter struct {
	net.Conn
	marker []byte
	n      *atomic.Int64
}

func (c *parseCounter) Write(b []byte) (int, error) {
	for _, msg := range bytes.SplitAfter(b, []byte{0}) {
		if len(msg) > 0 && bytes.Contains(msg, c.marker) {
			c.n.Add(1)
		}
	}
	return c.Conn.Write(b)
}

// TestRefusedClaimKeepsStatements: a Claim refused for another owner's
// lease (a caller polls it while that owner drives the operation) keeps
// its prepared statements: it is not an error of its batch, which would
// make pgx prepare them anew at every poll.
func TestRefusedClaimKeepsStatements(t *testing.T) {
	ctx := context.Background()
	var prepared atomic.Int64
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		pc.MaxConns = 1 // one connection: each statement prepared once
		wrapDial(pc, func(c net.Conn) net.Conn {
			return &parseCounter{Conn: c, marker: []byte("SET lease_owner = $3"), n: &prepared}
		})
	})
	now := time.Now()
	_, err := s.Create(ctx, journaltest.NewRecord("acct", "k", now))
	require.NoError(t, err)
	_, _, err = s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	for range 10 {
		_, _, err = s.Claim(ctx, "acct", "k", "b", now, now.Add(time.Minute))
		require.ErrorIs(t, err, journal.ErrLeased)
	}
	require.Equal(t, int64(1), prepared.Load(), "Claim's statement prepared")
}
