package pgjournal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// startCutProxy starts a proxy on 127.0.0.1 in front of the test server
// and returns its address: PgBouncer's server connections go through it.
// Once c is armed (afterCommit only), the proxy lets the first
// transaction whose statements hold c's marker commit, then cuts the
// server connection that carries it before its COMMIT's answer reaches
// PgBouncer, as when PostgreSQL crashes or fails over right then.
func startCutProxy(t *testing.T, c *commitCutter) (string, uint16) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn(t))
	require.NoError(t, err)
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			bouncer, err := l.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial(network, addr)
			if err != nil {
				_ = bouncer.Close()
				continue
			}
			p := &cutPipe{c: c, bouncer: bouncer, server: server}
			wg.Go(p.toServer)
			wg.Go(p.toBouncer)
		}
	})
	return "127.0.0.1", uint16(l.Addr().(*net.TCPAddr).Port)
}

// A cutPipe carries one of PgBouncer's server connections. Its two
// directions run at once, so the cut is decided on the way in (the
// transaction holds the marker, then its COMMIT goes to the server) and
// made on the way out (the COMMIT's answer, withheld).
type cutPipe struct {
	c               *commitCutter
	bouncer, server net.Conn
	marked          bool        // toServer's: this transaction holds the marker
	committing      atomic.Bool // its COMMIT went to the server
}

func (p *cutPipe) close() {
	_ = p.bouncer.Close()
	_ = p.server.Close()
}

func (p *cutPipe) toServer() {
	defer p.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := p.bouncer.Read(buf)
		b := buf[:n]
		// The transaction's statements go in one write that opens it
		// (inTx's batch); a round's read before it holds the keys too.
		if len(p.c.marker) > 0 && bytes.Contains(b, p.c.marker) && bytes.Contains(b, []byte("BEGIN")) &&
			p.c.armed.CompareAndSwap(int32(afterCommit), 0) {
			p.marked = true
		}
		if p.marked && bytes.Contains(b, commitMsg) {
			p.marked = false
			p.committing.Store(true)
		}
		if n > 0 {
			if _, err := p.server.Write(b); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cutPipe) toBouncer() {
	defer p.close()
	buf := make([]byte, 64<<10)
	var in []byte // the COMMIT's answer so far
	failed := false
	for {
		n, err := p.server.Read(buf)
		if p.committing.Load() {
			in = append(in, buf[:n]...)
			for len(in) >= 5 {
				size := 1 + int(binary.BigEndian.Uint32(in[1:5]))
				if len(in) < size {
					break
				}
				switch in[0] {
				case 'E':
					failed = true
				case 'Z': // the transaction has ended: cut
					p.c.committed <- !failed
					return
				}
				in = in[size:]
			}
		} else if n > 0 {
			if _, err := p.bouncer.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// openBouncedCutStore opens a Store on a fresh schema behind PgBouncer in
// transaction mode, whose server connections pass through a commitCutter.
func openBouncedCutStore(t *testing.T) (*pgjournal.Store, *commitCutter) {
	t.Helper()
	c := &commitCutter{committed: make(chan bool, 1)}
	host, port := startCutProxy(t, c)
	bouncer := startPgBouncerTo(t, host, port) + "&default_query_exec_mode=exec"
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		behind, err := pgxpool.ParseConfig(bouncer)
		require.NoError(t, err)
		*pc = *behind
	})
	return s, c
}

// TestPoolerLostCommit: behind PgBouncer in transaction mode, the
// connection between PgBouncer and PostgreSQL breaks after PostgreSQL
// committed a write, before its answer came back (the server crashed,
// restarted or failed over right then). PgBouncer does not close the
// client's connection silently: it answers the COMMIT with
// "FATAL: server conn crashed?", SQLSTATE 08P01 (pgbouncer src/server.c:
// SBUF_EV_RECV_FAILED → disconnect_server → disconnect_client, which
// sends the pooler's error). That answer is PgBouncer's, not
// PostgreSQL's verdict on the COMMIT: the write may have committed, and
// must say so (journal.ErrMaybeCommitted). Read as the server refusing
// the COMMIT, a Submit said nothing was journaled while its record,
// committed, was due for any replica's Run to send: the caller's retry
// under a new key would be a second order.
func TestPoolerLostCommit(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()

	t.Run("create", func(t *testing.T) {
		s, c := openBouncedCutStore(t)
		rec := journaltest.NewRecord("acct", "cut-here", now)
		rec.Created = now
		c.arm("cut-here", afterCommit)
		_, _, err := s.CreateClaimed(ctx, rec, "a", now.Add(time.Minute))
		require.True(t, c.wait(t), "the server committed the create")
		require.ErrorIs(t, err, journal.ErrMaybeCommitted, "CreateClaimed() whose COMMIT's answer PgBouncer lost")
		got, err := s.Get(ctx, "acct", "cut-here")
		require.NoError(t, err, "Get() after the create committed")
		require.Equal(t, rec, got)
	})

	t.Run("settle", func(t *testing.T) {
		s, c := openBouncedCutStore(t)
		mustCreate(t, s, "k")
		_, l, err := s.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
		require.NoError(t, err)
		c.arm(string(journal.StateSucceeded), afterCommit)
		calls := 0
		_, err = s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
			calls++
			r.State, r.Settled = journal.StateSucceeded, now
			r.Result = &journal.Result{ResourceID: "r1"}
			return nil
		})
		require.True(t, c.wait(t), "the server committed the settle")
		require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Update() whose COMMIT's answer PgBouncer lost")
		require.Equal(t, 1, calls, "the change applied again on the record it already changed")
	})

	// Two writers' changes in one transaction: each is told it may have
	// committed, and neither change is made again on the record it
	// already changed (a change appends, as the client's attempts do).
	t.Run("shared round", func(t *testing.T) {
		s, c := openBouncedCutStore(t)
		keys := []string{"cut-here-1", "cut-here-2"}
		mustCreate(t, s, keys...)
		g := holdRound(t, s)
		c.arm("cut-here", afterCommit)
		var calls [2]atomic.Int32
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Go(func() {
				_, errs[i] = s.Update(ctx, "acct", k, func(r *journal.Record) error {
					calls[i].Add(1)
					r.Review += "changed;"
					return nil
				})
			})
		}
		g.queued(2)
		g.release(wg.Wait)
		require.True(t, c.wait(t), "the server committed the round")
		for i, k := range keys {
			require.ErrorIs(t, errs[i], journal.ErrMaybeCommitted, "Update(%s) whose COMMIT's answer PgBouncer lost", k)
			require.Equal(t, int32(1), calls[i].Load(), "Update(%s)'s change applied", k)
			got, err := s.Get(ctx, "acct", k)
			require.NoError(t, err)
			require.Equal(t, "changed;", got.Review, "%s as written", k)
		}
	})

	t.Run("submit", func(t *testing.T) {
		s, c := openBouncedCutStore(t)
		srv, err := idemtest.NewServer()
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		cl := newClient(t, s, srv)
		c.arm("cut-key", afterCommit)
		_, err = cl.Submit(ctx, order(srv, "cut-key"))
		require.True(t, c.wait(t), "the server committed the create")
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose create committed, unheard")
		require.NotContains(t, err.Error(), "nothing was journaled")
		require.Empty(t, requestsFor(srv, "cut-key"), "requests before the journal write was known")

		res, err := cl.Submit(ctx, order(srv, "cut-key"))
		require.NoError(t, err, "Submit() again with the same key")
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, 1, submits(srv, "cut-key"), "submits")
		require.Equal(t, 1, srv.Effects("", "cut-key"), "side effects")
	})
}
