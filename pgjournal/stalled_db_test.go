package pgjournal_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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

// callerDeadline is the deadline the stalled-database tests give a
// caller's Do or Submit.
const callerDeadline = 10 * time.Second

// stallBound is how long a caller may wait on a database that has
// stopped answering: its deadline, and one journal call's bound past it
// (a journal call begun just before the deadline). A caller that waited
// on two such calls (a write, then the release of the lease) would take
// longer: the first call is made when the database stalls, well before
// the deadline, and a second would end a bound after the first.
const stallBound = callerDeadline + pgjournal.DefaultCallTimeout

// returnsWithin runs call and returns its error, failing the test if it
// has not returned within d. A call still stuck then is freed by resuming
// p (so that the test's cleanup does not wait on it for ever) before the
// test fails.
func returnsWithin(t *testing.T, p *stallProxy, d time.Duration, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	begin := time.Now()
	go func() { done <- call() }()
	select {
	case err := <-done:
		t.Logf("%s returned after %v: %v", what, time.Since(begin).Round(time.Millisecond), err)
		return err
	case <-time.After(d):
	}
	p.resume()
	select {
	case err := <-done:
		t.Fatalf("%s had not returned %v after it began, on a database that stopped answering; it did once the database answered again (%v)", what, d, err)
	case <-time.After(time.Minute):
		t.Fatalf("%s had not returned %v after it began, on a database that stopped answering, nor a minute after it answered again", what, d)
	}
	return nil
}

// stallAfterSubmit is a transport that stalls the database (p) as the
// first submit's answer reaches the client: the server has executed the
// order, and the client must record it in a journal that no longer
// answers.
type stallAfterSubmit struct {
	base http.RoundTripper
	p    *stallProxy
	once sync.Once
}

func (s *stallAfterSubmit) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if r.Method == http.MethodPost {
		s.once.Do(func() { s.p.stall(true) })
	}
	return resp, err
}

// stallRig is a proxy in front of the test server, a Store through it,
// at default settings, and a fake server.
func stallRig(t *testing.T) (*stallProxy, *pgjournal.Store, *idemtest.Server) {
	t.Helper()
	p := newStallProxy(t)
	store := openStoreVia(t, p, nil)
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return p, store, srv
}

// stallingClient is a Client on store, at default settings but opts, whose
// requests to srv stall p once the first submit is answered.
func stallingClient(t *testing.T, store idem.Store, srv *idemtest.Server, p *stallProxy, opts ...idem.Option) *idem.Client {
	t.Helper()
	hc := *srv.Client()
	hc.Transport = &stallAfterSubmit{base: hc.Transport, p: p}
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(&hc), idem.WithResultEndpoint(srv.ResultTemplate())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkOneOrder asserts that key's operation succeeded with one order:
// one side effect, one submit, and the same key and body on every
// request the server received for it.
func checkOneOrder(t *testing.T, c *idem.Client, srv *idemtest.Server, key string) {
	t.Helper()
	op, err := c.Lookup(context.Background(), "", key)
	require.NoError(t, err, "Lookup()")
	require.Equal(t, idem.StateSucceeded, op.State, "state")
	require.Equal(t, 1, srv.Effects("", key), "side effects")
	require.Equal(t, 1, submits(srv, key), "submits")
	var first *idemtest.Request
	for _, r := range srv.Requests() {
		if r.Key != key || r.Method != http.MethodPost {
			continue
		}
		if first == nil {
			first = &r
			continue
		}
		require.Equal(t, first.RawKey, r.RawKey, "key sent")
		require.Equal(t, first.BodySHA256, r.BodySHA256, "body sent")
	}
}

// TestStalledDatabaseDo: a database that stops answering (no reset, no
// error: its host is gone) does not hold a caller past its deadline by
// more than one journal call's bound, whether it stalls before Do claims
// the operation or while Submit records the server's answer; the caller
// is told the outcome is unknown (nothing was sent, or the order is
// journaled and due), and once the database answers again the operation
// settles with one order.
func TestStalledDatabaseDo(t *testing.T) {
	// Parallel: it waits out caller deadlines and call bounds (seconds) on
	// a database its own proxy stalls, idle meanwhile, on a schema of its own.
	t.Parallel()
	t.Run("before the claim", func(t *testing.T) {
		p, store, srv := stallRig(t)
		c := newClient(t, store, srv)
		op, err := c.Prepare(context.Background(), order(srv, "k"))
		require.NoError(t, err)

		p.stall(true)
		ctx, cancel := context.WithTimeout(context.Background(), callerDeadline)
		defer cancel()
		err = returnsWithin(t, p, stallBound, "Do()", func() error {
			_, err := c.Do(ctx, op)
			return err
		})
		require.Error(t, err, "Do() on a stalled database")
		require.Empty(t, requestsFor(srv, "k"), "requests while the journal could not be written")

		p.resume()
		res, err := c.Do(context.Background(), op)
		require.NoError(t, err, "Do() once the database answers")
		require.Equal(t, idem.StateSucceeded, res.State)
		checkOneOrder(t, c, srv, "k")
	})

	t.Run("while recording the answer", func(t *testing.T) {
		p, store, srv := stallRig(t)
		c := stallingClient(t, store, srv, p)

		ctx, cancel := context.WithTimeout(context.Background(), callerDeadline)
		defer cancel()
		err := returnsWithin(t, p, stallBound, "Submit()", func() error {
			_, err := c.Submit(ctx, order(srv, "k"))
			return err
		})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose answer the journal could not record")
		require.Equal(t, 1, srv.Effects("", "k"), "side effects before the database answers again")

		p.resume()
		// The process goes on (the same Client, the same owner): Resume,
		// as a reconciler's pass would, settles it by its query.
		_, err = c.Resume(context.Background())
		require.NoError(t, err, "Resume() once the database answers")
		checkOneOrder(t, c, srv, "k")
	})
}

// A running is a Run of the test's.
type running struct {
	c    *idem.Client
	stop context.CancelFunc
	ran  chan error
}

// startRun starts c's Run, stopped at cleanup.
func startRun(t *testing.T, c *idem.Client) *running {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	r := &running{c: c, stop: stop, ran: make(chan error, 1)}
	go func() { r.ran <- c.Run(ctx) }()
	return r
}

// failedPass waits, at most d (see returnsWithin), until one of Run's
// passes has failed, and returns its error, or Run's if it returned.
func (r *running) failedPass(t *testing.T, p *stallProxy, d time.Duration) error {
	t.Helper()
	return returnsWithin(t, p, d, "Run's failing pass", func() error {
		for r.c.Health().ConsecutiveErrors == 0 {
			select {
			case err := <-r.ran:
				return err
			case <-time.After(10 * time.Millisecond):
			}
		}
		return r.c.Health().LastJournalError
	})
}

// stopped ends Run's context and fails the test unless Run returns
// context.Canceled within d.
func (r *running) stopped(t *testing.T, d time.Duration) {
	t.Helper()
	r.stop()
	select {
	case err := <-r.ran:
		require.ErrorIs(t, err, context.Canceled, "Run()")
	case <-time.After(d):
		t.Fatal("Run() did not return once its context ended")
	}
}

// TestStalledDatabaseRun: Run whose visit meets a database that stops
// answering mid-visit does not hang: the pass fails within one journal
// call's bound and Run backs off (Health says so); once the database
// answers again Run settles the operation with one order and passes
// cleanly; and it stops when asked. The lease is short so that the one
// the stalled visit could not give up expires soon (it lasts the attempt
// timeout more).
func TestStalledDatabaseRun(t *testing.T) {
	// Parallel: it waits out call bounds (seconds) on a database its own
	// proxy stalls, idle meanwhile, on a schema of its own.
	t.Parallel()
	p, store, srv := stallRig(t)
	c := stallingClient(t, store, srv, p,
		idem.WithReconcile(50*time.Millisecond, time.Second, time.Hour), idem.WithLease("run", time.Second))
	_, err := c.Prepare(context.Background(), order(srv, "k"))
	require.NoError(t, err)

	r := startRun(t, c)
	err = r.failedPass(t, p, stallBound)
	require.Error(t, err, "Run's pass on a stalled database")
	require.Equal(t, 1, srv.Effects("", "k"), "side effects")

	p.resume()
	back := time.Now()
	require.Eventually(t, func() bool {
		op, err := c.Lookup(context.Background(), "", "k")
		return err == nil && op.State == idem.StateSucceeded && c.Health().ConsecutiveErrors == 0
	}, stallBound, 10*time.Millisecond, "Run settles the operation once the database answers")
	t.Logf("settled %v after the database answered again", time.Since(back).Round(time.Millisecond))
	checkOneOrder(t, c, srv, "k")
	r.stopped(t, stallBound)
}

// TestStalledConnectionDropped: a connection that stopped answering (a
// path through a failed router: new connections work) is dropped when a
// call on it reaches the Store's bound (WithCallTimeout), though the
// caller's context never ends, as the client's journal contexts never
// do; it is not handed to the next call, which is made at once on a new
// one. A write that gave up before its COMMIT was sent (each here: the
// statements before it got no answer) says it did not commit, and names
// the bound (one cut after its COMMIT: TestCallTimeoutMessages). (pgx
// holds the dropped connection's place in the pool for up to 15 s more
// while it closes it: a pool of one would make the next call wait that
// long.)
func TestStalledConnectionDropped(t *testing.T) {
	const bound = time.Second
	p := newStallProxy(t)
	store := openStoreVia(t, p, nil, pgjournal.WithCallTimeout(bound))
	mustCreate(t, store, "k")
	require.Equal(t, 1, p.connections(), "connections")
	forever := context.Background()
	calls := []struct {
		name  string
		call  func() error
		write bool // its error names the bound
	}{
		{"Get()", func() error { _, err := store.Get(forever, "acct", "k"); return err }, false},
		// Its round's read gives up: nothing written, and it says so.
		{"Update()", func() error {
			_, err := store.Update(forever, "acct", "k", func(r *journal.Record) error {
				r.Review = "looked at"
				return nil
			})
			return err
		}, true},
		{"Claim()", func() error {
			now := time.Now()
			_, _, err := store.Claim(forever, "acct", "k", "a", now, now.Add(time.Minute))
			return err
		}, true},
	}
	for _, tc := range calls {
		before := p.connections()
		p.stall(false)
		err := returnsWithin(t, p, 5*bound, tc.name, tc.call)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s on a stalled connection", tc.name)
		require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s on a stalled connection", tc.name)
		if tc.write {
			require.ErrorContains(t, err, "WithCallTimeout", "%s on a stalled connection", tc.name)
		}
		err = returnsWithin(t, p, 5*bound, tc.name+" again", tc.call)
		require.NoError(t, err, "%s after one on a stalled connection gave up", tc.name)
		require.Greater(t, p.connections(), before, "connections after %s: the stalled one was used again", tc.name)
	}
}

// TestStalledDatabaseRunBatch: Run's pass that claimed a batch of due
// operations and meets a database that stops answering mid-pass fails
// within a few journal call bounds, however many it claimed: the writes
// of a shared round that gave up say so (context.DeadlineExceeded, not
// the round's context.Canceled), so their drives do not then wait on a
// release too, and the leases of the operations the pass did not visit
// are given up within the attempt timeout, not one journal bound each.
// Run then backs off, and stops when asked; once the database answers
// again every operation settles with one order.
func TestStalledDatabaseRunBatch(t *testing.T) {
	// Parallel: it waits out call bounds (seconds) on a database its own
	// proxy stalls, idle meanwhile, on a schema of its own.
	t.Parallel()
	const ops = 60
	p, store, srv := stallRig(t)
	c := stallingClient(t, store, srv, p,
		idem.WithReconcile(50*time.Millisecond, time.Second, time.Hour), idem.WithLease("run", time.Second))
	keys := make([]string, ops)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
		_, err := c.Prepare(context.Background(), order(srv, keys[i]))
		require.NoError(t, err)
	}

	r := startRun(t, c)
	// The visits under way give up after a journal bound; those the
	// workers took up as the first failed (before three failures stopped
	// the pass) wait for a place in the pool, which pgx frees up to a bound
	// later, and give up a bound after that; then the releases, within
	// the attempt timeout. A bound per operation the pass claimed would be
	// 30 minutes. Alone it takes 90-100 s; in the whole suite under -race
	// a visit taken up a moment late once waited a bound more (over
	// 120 s), so the limit allows four.
	bound := 4*pgjournal.DefaultCallTimeout + idem.DefaultAttemptTimeout + 20*time.Second
	err := r.failedPass(t, p, bound)
	require.Error(t, err, "Run's pass on a stalled database")

	p.resume()
	require.Eventually(t, func() bool {
		ops, err := c.List(context.Background(), idem.Filter{Open: true})
		return err == nil && len(ops) == 0
	}, 2*bound, 10*time.Millisecond, "Run settles every operation once the database answers")
	for _, k := range keys {
		checkOneOrder(t, c, srv, k)
	}
	r.stopped(t, bound)
}

// TestStalledPoolBounded: when every connection of the pool is stuck on a
// database that stopped answering (and new ones get no answer either),
// each call gives up at its bound (WithCallTimeout), whether it holds a
// stuck connection, waits for one to come free, or has pgx ping an idle
// one before use; a write says it wrote nothing. Once the database
// answers again, calls work.
func TestStalledPoolBounded(t *testing.T) {
	const bound = time.Second
	p := newStallProxy(t)
	var pinged atomic.Int64
	store := openStoreVia(t, p, func(pc *pgxpool.Config) {
		pc.MaxConns = 2
		// pgx pings a connection idle for over a second before handing
		// it out: here every time, so that the ping is among the waits.
		pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool {
			pinged.Add(1)
			return true
		}
	}, pgjournal.WithCallTimeout(bound))
	mustCreate(t, store, "k")
	forever := context.Background()
	p.stall(true)
	calls := map[string]func() error{
		"Get()": func() error { _, err := store.Get(forever, "acct", "k"); return err },
		"Update()": func() error {
			_, err := store.Update(forever, "acct", "k", func(r *journal.Record) error {
				r.Review = "looked at"
				return nil
			})
			return err
		},
		"Claim()": func() error {
			now := time.Now()
			_, _, err := store.Claim(forever, "acct", "k", "a", now, now.Add(time.Minute))
			return err
		},
		"Create()": func() error {
			_, err := store.Create(forever, journaltest.NewRecord("acct", "new", time.Now()))
			return err
		},
	}
	type result struct {
		what string
		err  error
	}
	results := make(chan result, len(calls))
	begin := time.Now()
	for what, call := range calls {
		go func() { results <- result{what, call()} }()
	}
	deadline := time.After(3 * bound)
	for range calls {
		select {
		case r := <-results:
			t.Logf("%s returned after %v: %v", r.what, time.Since(begin).Round(time.Millisecond), r.err)
			require.ErrorIs(t, r.err, context.DeadlineExceeded, "%s on a stalled pool", r.what)
			require.NotErrorIs(t, r.err, journal.ErrMaybeCommitted, "%s on a stalled pool: nothing was committed", r.what)
		case <-deadline:
			p.resume() // frees what is stuck, for cleanup
			t.Fatalf("calls on a stalled pool still waiting %v after they began", 3*bound)
		}
	}
	require.NotZero(t, pinged.Load(), "pings")

	p.resume()
	_, err := store.Get(forever, "acct", "k")
	require.NoError(t, err, "Get() once the database answers")
}

// TestStalledOpenBounded: Open on a database that accepts connections
// but never answers gives up at WithCallTimeout, though its context
// never ends, and says it could not reach the server.
func TestStalledOpenBounded(t *testing.T) {
	const bound = time.Second
	p := newStallProxy(t)
	p.stall(true)
	u, err := url.Parse(dsn(t))
	require.NoError(t, err)
	q := u.Query()
	q.Del("host")
	u.RawQuery = q.Encode()
	u.Host = p.ln.Addr().String()
	err = returnsWithin(t, p, 3*bound, "Open()", func() error {
		s, err := pgjournal.Open(context.Background(), u.String(), pgjournal.WithCallTimeout(bound))
		if err == nil {
			_ = s.Close()
		}
		return err
	})
	require.ErrorIs(t, err, context.DeadlineExceeded, "Open() on a stalled database")
	require.ErrorContains(t, err, "WithCallTimeout")
}
