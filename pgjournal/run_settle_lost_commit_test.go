package pgjournal_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
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

// end stops Run and waits for it to return.
func (r *running) end() {
	r.stop()
	<-r.ran
}

// reconcilingClient returns a fake server and a client on s that counts
// settlements, whose Run looks for due operations every 20ms.
func reconcilingClient(t *testing.T, s *pgjournal.Store) (*idemtest.Server, *idem.Client, *settleCalls) {
	t.Helper()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	calls := newSettleCalls()
	c := newClient(t, s, srv, append(calls.options(),
		idem.WithLease("replica-a", idem.DefaultLeaseDuration),
		idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))...)
	return srv, c, calls
}

// requireToldOnce checks that the application was told once of the
// settlement of "k", sent and made once.
func requireToldOnce(t *testing.T, calls *settleCalls, srv *idemtest.Server) {
	t.Helper()
	hook, fn := calls.counts("k")
	require.Equal(t, 1, hook, "settle hook calls")
	require.Equal(t, 1, fn, "settle func calls")
	require.Equal(t, 1, submits(srv, "k"), "submits")
	require.Equal(t, 1, srv.Effects("", "k"), "side effects")
}

// TestRunSettleCommitAnswerLost: an outbox operation (PrepareTx), which
// only Run sends and only the settle func reports, is sent by Run and
// answered; the COMMIT of its outcome reaches PostgreSQL but its answer
// is lost (the connection, or a pooler's to the server, broke:
// journal.ErrMaybeCommitted). The operation is settled in the journal,
// so no Run visits it again: unless the visit that wrote it reads it
// back, nobody ever tells the application that the order it handed off
// was charged. It is told once, and the order sent once.
func TestRunSettleCommitAnswerLost(t *testing.T) {
	ctx := context.Background()
	s, cutter := openCutStore(t)
	srv, c, calls := reconcilingClient(t, s)
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := s.PrepareTx(ctx, tx, c, order(srv, "k"))
		return err
	}), "the business transaction with the intent")
	// The settling write is the only one whose parameters say succeeded
	// (its state column).
	cutter.arm(string(journal.StateSucceeded), afterCommit)
	run := startRun(t, c)
	require.True(t, cutter.wait(t), "the outcome's write committed")
	waitFor(t, "the settle func told", func() bool {
		_, fn := calls.counts("k")
		return fn > 0
	})
	run.end()

	op, err := c.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State, "journaled state")
	requireToldOnce(t, calls, srv)
}

// serverDown makes a pool's connections fail, and its dials be refused,
// while down is set: PostgreSQL restarting. refused counts the dials
// refused.
type serverDown struct {
	down    atomic.Bool
	refused atomic.Int32
}

var errServerDown = errors.New("test: server restarting (connection refused)")

func (s *serverDown) dial(pc *pgxpool.Config, wrap func(net.Conn) net.Conn) {
	var d net.Dialer
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if s.down.Load() {
			s.refused.Add(1)
			return nil, errServerDown
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &downConn{Conn: wrap(c), s: s}, nil
	}
}

type downConn struct {
	net.Conn
	s *serverDown
}

func (c *downConn) Read(p []byte) (int, error) {
	if c.s.down.Load() {
		_ = c.Conn.Close()
		return 0, errServerDown
	}
	return c.Conn.Read(p)
}

func (c *downConn) Write(p []byte) (int, error) {
	if c.s.down.Load() {
		_ = c.Conn.Close()
		return 0, errServerDown
	}
	return c.Conn.Write(p)
}

// TestRunSettleCommitAnswerLostServerRestarting: as
// TestRunSettleCommitAnswerLost, but the connection broke because
// PostgreSQL went down right after the COMMIT (a restart, a failover
// behind a pooler): the first read of the record fails too. Read back
// once, the settlement reached nobody; read back until the server answers
// again (within the attempt timeout, here after two refused dials), the
// application is told.
func TestRunSettleCommitAnswerLostServerRestarting(t *testing.T) {
	ctx := context.Background()
	cutter := &commitCutter{committed: make(chan bool, 1)}
	down := &serverDown{}
	cutter.onCut = func() { down.down.Store(true) }
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		down.dial(pc, func(conn net.Conn) net.Conn { return &cutterConn{Conn: conn, c: cutter} })
	})
	srv, c, calls := reconcilingClient(t, s)
	_, err := c.Prepare(ctx, order(srv, "k"))
	require.NoError(t, err)

	cutter.arm(string(journal.StateSucceeded), afterCommit)
	run := startRun(t, c)
	require.True(t, cutter.wait(t), "the outcome's write committed")
	// The read back, then the lease's release or a second read back.
	waitFor(t, "two dials refused while the server is down", func() bool { return down.refused.Load() >= 2 })
	down.down.Store(false) // back up
	waitFor(t, "the settle func told", func() bool {
		_, fn := calls.counts("k")
		return fn > 0
	})
	run.end()

	requireToldOnce(t, calls, srv)
}
