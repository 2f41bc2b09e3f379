package pgjournal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// A cut is where a commitCutter cuts the connection that carries the
// transaction it waits for.
type cut int32

const (
	// afterCommit lets the server run the transaction's statements and
	// its COMMIT and say so, then cuts the connection before the client
	// hears it: committed, the client cannot tell.
	afterCommit cut = iota + 1
	// beforeCommit sends the transaction's statements, takes the COMMIT
	// the client sends next and cuts instead of passing it on: the server
	// rolls it back, the client cannot tell.
	beforeCommit
	// unsent sends the transaction's statements but not the Sync that
	// ends their batch, then cuts, before the client has sent the COMMIT:
	// the server rolls it back, and the client knows it did.
	unsent
)

// A commitCutter sits between a Store's pool and PostgreSQL, in each
// connection the pool dials (an in-process proxy on the server's socket),
// and, once armed, cuts the first connection that sends a transaction
// whose bytes hold marker (a parameter of its statements) at a point
// chosen deterministically: after the server said its COMMIT ended it,
// as the COMMIT is sent, or before. What the server did is then known,
// and the client is told nothing.
type commitCutter struct {
	marker []byte
	armed  atomic.Int32 // a cut, or 0
	// committed receives, once per arming, whether the server committed
	// the transaction it cut.
	committed chan bool
	// onCut, if set, runs as the connection is cut after its COMMIT,
	// before the client can read anything: the server going down then.
	onCut func()
}

// openCutStore opens a Store on a fresh schema whose connections pass
// through a commitCutter.
func openCutStore(t testing.TB) (*pgjournal.Store, *commitCutter) {
	t.Helper()
	c := &commitCutter{committed: make(chan bool, 1)}
	s := openStoreWrapping(t, func(conn net.Conn) net.Conn { return &cutterConn{Conn: conn, c: c} })
	return s, c
}

// openLeasedCutStore is openCutStore with one record, "k", leased to owner.
func openLeasedCutStore(t *testing.T, owner string, now time.Time) (*pgjournal.Store, *commitCutter, journal.Lease) {
	t.Helper()
	s, c := openCutStore(t)
	mustCreate(t, s, "k")
	_, l, err := s.Claim(context.Background(), "acct", "k", owner, now, now.Add(time.Minute))
	require.NoError(t, err)
	return s, c, l
}

// arm makes the cutter cut the next transaction that holds marker at at.
func (c *commitCutter) arm(marker string, at cut) {
	c.marker = []byte(marker)
	c.armed.Store(int32(at))
}

// wait returns whether the server committed the transaction cut.
func (c *commitCutter) wait(t testing.TB) bool {
	t.Helper()
	select {
	case committed := <-c.committed:
		return committed
	case <-time.After(time.Minute):
		t.Fatal("no transaction was cut")
		return false
	}
}

// syncMsg is the extended protocol's Sync message, which ends the batch
// of statements sent before it.
var syncMsg = []byte{'S', 0, 0, 0, 4}

// commitMsg is in the simple-protocol Query message of a COMMIT;
// pgx's Tx.Commit sends it in lower case (pgxCommitMsg).
var commitMsg, pgxCommitMsg = []byte("COMMIT\x00"), []byte("commit\x00")

type cutterConn struct {
	net.Conn
	c *commitCutter
	// at is the cut to make at this connection's next COMMIT: its
	// transaction holds the marker.
	at cut
	// afterCommit: the COMMIT was sent; Read looks for the server's
	// ReadyForQuery, which says it ended, and hands the client nothing.
	waiting bool
	in      []byte
	failed  bool // the server reported an error: rolled back
}

func (cc *cutterConn) Write(b []byte) (int, error) {
	if cc.at != 0 && (bytes.Contains(b, commitMsg) || bytes.Contains(b, pgxCommitMsg)) {
		at := cc.at
		cc.at = 0
		if at == afterCommit {
			cc.waiting = true
			return cc.Conn.Write(b)
		}
		_ = cc.Conn.Close()
		cc.c.committed <- false
		return len(b), nil // the client goes on to read, and meets the cut
	}
	if !bytes.Contains(b, cc.c.marker) || len(cc.c.marker) == 0 {
		return cc.Conn.Write(b)
	}
	switch at := cut(cc.c.armed.Load()); at {
	case afterCommit, beforeCommit:
		if cc.c.armed.CompareAndSwap(int32(at), 0) {
			cc.at = at
		}
	case unsent:
		if !bytes.HasSuffix(b, syncMsg) || !cc.c.armed.CompareAndSwap(int32(unsent), 0) {
			break
		}
		if _, err := cc.Conn.Write(b[:len(b)-len(syncMsg)]); err != nil {
			return 0, err
		}
		_ = cc.Conn.Close()
		cc.c.committed <- false
		return len(b), nil // the client goes on to read, and meets the cut
	}
	return cc.Conn.Write(b)
}

func (cc *cutterConn) Read(p []byte) (int, error) {
	if !cc.waiting {
		return cc.Conn.Read(p)
	}
	buf := make([]byte, 4096)
	for {
		n, err := cc.Conn.Read(buf)
		cc.in = append(cc.in, buf[:n]...)
		for len(cc.in) >= 5 {
			size := 1 + int(binary.BigEndian.Uint32(cc.in[1:5]))
			if len(cc.in) < size {
				break
			}
			switch cc.in[0] {
			case 'E':
				cc.failed = true
			case 'Z': // ReadyForQuery: the transaction has ended
				cc.waiting = false
				if cc.c.onCut != nil {
					cc.c.onCut()
				}
				_ = cc.Conn.Close()
				cc.c.committed <- !cc.failed
				return 0, io.EOF
			}
			cc.in = cc.in[size:]
		}
		if err != nil {
			return 0, err
		}
	}
}

// requireCut checks the error of a write cut at at: one whose COMMIT was
// sent may have committed (journal.ErrMaybeCommitted), one cut before
// it did not, and says so.
func requireCut(t *testing.T, err error, at cut, what string) {
	t.Helper()
	if at == unsent {
		require.Error(t, err, "%s cut before its COMMIT", what)
		require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s cut before its COMMIT", what)
		return
	}
	require.ErrorIs(t, err, journal.ErrMaybeCommitted, "%s cut", what)
}

// cutNames names the cuts in subtests.
var cutNames = map[cut]string{afterCommit: "committed", beforeCommit: "rolled back", unsent: "not sent"}

// TestAmbiguousCommit: the connection breaks after a write was sent, at a
// known point either side of its COMMIT, or before the COMMIT was sent.
// The write reports journal.ErrMaybeCommitted when its COMMIT was sent,
// committed or not, and a plain error when it was not; what is read next
// is what the server did; and the same write made again gets an answer
// that says where it stands, not a duplicate and not an error it cannot
// get past: a create finds its record (journal.ErrExists, the same
// record), a settle under the same lease finds it settled
// (journal.ErrTerminal, not journal.ErrLeaseLost) or makes it, a renewal
// or a release under the same lease works.
func TestAmbiguousCommit(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC() // as records are read back
	settle := func(r *journal.Record) error {
		r.State, r.Settled = journal.StateSucceeded, now
		r.Result = &journal.Result{ResourceID: "cut-here"}
		return nil
	}
	for _, at := range []cut{afterCommit, beforeCommit, unsent} {
		committed := at == afterCommit
		name := cutNames[at]

		t.Run("create "+name, func(t *testing.T) {
			s, c := openCutStore(t)
			rec := journaltest.NewRecord("acct", "cut-here", now)
			rec.Created = now
			c.arm("cut-here", at)
			_, _, err := s.CreateClaimed(ctx, rec, "a", now.Add(time.Minute))
			requireCut(t, err, at, "CreateClaimed()")
			require.Equal(t, committed, c.wait(t), "committed")

			got, err := s.Get(ctx, "acct", "cut-here")
			if !committed {
				require.ErrorIs(t, err, journal.ErrNotFound, "Get() after a create rolled back")
				got, l, err := s.CreateClaimed(ctx, rec, "a", now.Add(time.Minute))
				require.NoError(t, err, "CreateClaimed() again")
				require.Equal(t, rec, got)
				require.Equal(t, uint64(1), l.Token)
				return
			}
			require.NoError(t, err, "Get() after a create committed")
			require.Equal(t, rec, got, "the record as sent")
			again, l, err := s.CreateClaimed(ctx, rec, "a", now.Add(time.Minute))
			require.ErrorIs(t, err, journal.ErrExists, "CreateClaimed() again: the client joins the record")
			require.Equal(t, rec, again, "the record found is the one sent")
			require.Zero(t, l, "no lease from a create that found its record")
			// The lost create's lease is its owner's: another owner waits
			// for its end, the owner claims it anew.
			_, held, err := s.Claim(ctx, "acct", "cut-here", "b", now, now.Add(time.Minute))
			require.ErrorIs(t, err, journal.ErrLeased, "another owner's Claim()")
			require.Equal(t, "a", held.Owner)
			_, l, err = s.Claim(ctx, "acct", "cut-here", "a", now, now.Add(time.Minute))
			require.NoError(t, err, "the owner's Claim()")
			require.Equal(t, uint64(2), l.Token)
		})

		t.Run("settle "+name, func(t *testing.T) {
			s, c, l := openLeasedCutStore(t, "a", now)
			c.arm("cut-here", at)
			_, err := s.Update(journal.WithLease(ctx, l), "acct", "k", settle)
			requireCut(t, err, at, "Update()")
			require.Equal(t, committed, c.wait(t), "committed")

			got, err := s.Get(ctx, "acct", "k")
			require.NoError(t, err)
			require.Equal(t, committed, got.State == journal.StateSucceeded, "settled: state %s", got.State)
			called := false
			again, err := s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
				called = true
				return settle(r)
			})
			if committed {
				require.ErrorIs(t, err, journal.ErrTerminal, "the settle again under the same lease")
				require.NotErrorIs(t, err, journal.ErrLeaseLost, "the settle again under the same lease")
				require.False(t, called, "fn called on the settled record")
			} else {
				require.NoError(t, err, "the settle again under the same lease")
				require.Equal(t, journal.StateSucceeded, again.State)
			}
			require.NoError(t, s.Release(ctx, l), "Release() of the lease the settle was made under")
		})

		t.Run("change "+name, func(t *testing.T) {
			s, c, l := openLeasedCutStore(t, "a", now)
			c.arm("cut-here", at)
			_, err := s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
				r.Review = "cut-here"
				return nil
			})
			requireCut(t, err, at, "Update()")
			require.Equal(t, committed, c.wait(t), "committed")

			// Made again under the same lease, it sees what the first made.
			var seen string
			_, err = s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
				seen, r.Review = r.Review, "again"
				return nil
			})
			require.NoError(t, err, "the change again under the same lease")
			require.Equal(t, map[bool]string{true: "cut-here", false: ""}[committed], seen, "what the change again found")
		})

		t.Run("claim "+name, func(t *testing.T) {
			s, c := openCutStore(t)
			mustCreate(t, s, "k")
			c.arm("cut-owner", at)
			_, _, err := s.Claim(ctx, "acct", "k", "cut-owner", now, now.Add(time.Minute))
			requireCut(t, err, at, "Claim()")
			require.Equal(t, committed, c.wait(t), "committed")

			_, held, err := s.Claim(ctx, "acct", "k", "b", now, now.Add(time.Minute))
			if committed {
				require.ErrorIs(t, err, journal.ErrLeased, "another owner's Claim() after a claim committed")
				require.Equal(t, "cut-owner", held.Owner)
				_, l, err := s.Claim(ctx, "acct", "k", "cut-owner", now, now.Add(time.Minute))
				require.NoError(t, err, "the owner's Claim() again")
				require.Equal(t, uint64(2), l.Token)
			} else {
				require.NoError(t, err, "another owner's Claim() after a claim rolled back")
			}
		})

		t.Run("renew "+name, func(t *testing.T) {
			s, c, l := openLeasedCutStore(t, "cut-owner", now)
			c.arm("cut-owner", at)
			_, err := s.Renew(ctx, l, now.Add(time.Hour))
			requireCut(t, err, at, "Renew()")
			require.Equal(t, committed, c.wait(t), "committed")
			_, err = s.Renew(ctx, l, now.Add(time.Hour))
			require.NoError(t, err, "Renew() again with the same lease")
			require.NoError(t, s.Release(ctx, l), "Release() of the same lease")
		})
	}
}

// TestAmbiguousCommitSubmit: through the client at its default settings.
// A Submit whose journal write may or may not have committed sends
// nothing and says so (ErrUnknownOutcome, journal.ErrMaybeCommitted), and
// the same Submit again settles the operation with one request; one whose
// create was cut before its COMMIT was sent says nothing was journaled
// (not ErrUnknownOutcome), and the same Submit again settles it. A Submit
// whose outcome's write was cut after its commit reports the outcome
// settled: it reads the record back and finds its outcome there; Do
// returns it and sends nothing more. Cut before its commit, it reports
// the outcome unknown, and the next Do settles it by a query, not by a
// second submit.
func TestAmbiguousCommitSubmit(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*commitCutter, *idemtest.Server, *idem.Client) {
		s, c := openCutStore(t)
		srv, err := idemtest.NewServer()
		require.NoError(t, err)
		t.Cleanup(srv.Close)
		return c, srv, newClient(t, s, srv)
	}
	for _, at := range []cut{afterCommit, beforeCommit, unsent} {
		name := cutNames[at]
		t.Run("create "+name, func(t *testing.T) {
			c, srv, cl := setup(t)
			c.arm("cut-key", at)
			res, err := cl.Submit(ctx, order(srv, "cut-key"))
			requireCut(t, err, at, "Submit()")
			if at == unsent {
				require.NotErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() cut before its COMMIT")
				require.ErrorContains(t, err, "nothing was journaled")
			} else {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() cut")
				require.NotNil(t, res)
			}
			c.wait(t)
			require.Empty(t, requestsFor(srv, "cut-key"), "requests for an operation not known to be journaled")

			res, err = cl.Submit(ctx, order(srv, "cut-key"))
			require.NoError(t, err, "Submit() again")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, submits(srv, "cut-key"), "submits")
			require.Equal(t, 1, srv.Effects("", "cut-key"), "side effects")
		})

		t.Run("outcome "+name, func(t *testing.T) {
			c, srv, cl := setup(t)
			// The settling write is the only one whose parameters say
			// succeeded (its state column).
			c.arm(string(journal.StateSucceeded), at)
			res, err := cl.Submit(ctx, order(srv, "k"))
			committed := c.wait(t)
			require.Equal(t, at == afterCommit, committed, "committed")
			if committed {
				// Read back: the outcome is the journal's.
				require.NoError(t, err, "Submit() whose outcome's write committed, its answer lost")
				require.Equal(t, idem.StateSucceeded, res.State)
			} else {
				require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose outcome's write was cut")
			}

			op, err := cl.Lookup(ctx, "", "k")
			require.NoError(t, err)
			require.Equal(t, committed, op.State == idem.StateSucceeded, "Lookup() state %s", op.State)
			res, err = cl.Do(ctx, op)
			require.NoError(t, err, "Do()")
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, submits(srv, "k"), "submits")
			require.Equal(t, 1, srv.Effects("", "k"), "side effects")
			if committed {
				require.Len(t, requestsFor(srv, "k"), 1, "requests after the outcome was read back")
			}
		})
	}
}
