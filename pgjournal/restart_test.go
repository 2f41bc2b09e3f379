package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// privateServer is a PostgreSQL of one test's own, which it may stop and
// start without disturbing the tests that share IDEM_PG_DSN's.
type privateServer struct {
	bin, dir string
	runAs    []string // runuser -u postgres -- when root: initdb refuses root
	DSN      string
}

// startPrivateServer initdbs and starts a PostgreSQL in a temporary
// directory, listening on a unix socket there only, with the binaries of
// IDEM_PG_BIN (exported by scripts/postgres.sh). It is stopped at cleanup.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	dsn(t) // skips, or fails under IDEM_REQUIRE_PG, like every PostgreSQL test
	bin := os.Getenv("IDEM_PG_BIN")
	if bin == "" {
		if os.Getenv("IDEM_REQUIRE_PG") != "" {
			t.Fatal("IDEM_PG_BIN is not set: run the tests with scripts/test.sh, whose scripts/postgres.sh exports it")
		}
		t.Skip("IDEM_PG_BIN not set: the restart test starts a PostgreSQL of its own with these binaries")
	}
	dir, err := os.MkdirTemp("", "idem-pg-restart-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &privateServer{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root: initdb needs the postgres user")
		uid, _ := strconv.Atoi(u.Uid)
		require.NoError(t, os.Chown(dir, uid, -1))
		s.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	s.run(t, "initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale")
	s.DSN = "postgres://postgres@/postgres?host=" + dir + "&sslmode=disable"
	s.Start(t)
	t.Cleanup(func() { _ = s.ctl("stop", "-m", "immediate") })
	return s
}

func (s *privateServer) command(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, s.runAs...), filepath.Join(s.bin, name)), args...)
	return exec.Command(argv[0], argv[1:]...)
}

func (s *privateServer) run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := s.command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s: %s", name, out)
}

func (s *privateServer) ctl(args ...string) error {
	args = append([]string{"-D", filepath.Join(s.dir, "data"), "-w", "-t", "60"}, args...)
	out, err := s.command("pg_ctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// startRestartRig starts a private server, opens a migrated Store on it
// and starts a fake API server; cleanup closes them.
func startRestartRig(t *testing.T) (*privateServer, *pgjournal.Store, *idemtest.Server) {
	t.Helper()
	pg := startPrivateServer(t)
	store, err := pgjournal.Open(context.Background(), pg.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.Migrate(context.Background()))
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return pg, store, srv
}

// Start starts the server and waits until it accepts connections.
func (s *privateServer) Start(t *testing.T) {
	t.Helper()
	require.NoError(t, s.ctl("-l", filepath.Join(s.dir, "server.log"),
		"-o", "-c listen_addresses='' -c unix_socket_directories='"+s.dir+"'", "start"))
}

// Crash stops the server at once, as a crash would (immediate mode: no
// checkpoint, recovery from the WAL at the next start).
func (s *privateServer) Crash(t *testing.T) {
	t.Helper()
	require.NoError(t, s.ctl("stop", "-m", "immediate"))
}

// TestPostgresRestart: while PostgreSQL is down, Submit fails with an
// error that says nothing was journaled and names the journal's error,
// and sends nothing; an operation whose
// outcome could not be written stays journaled, unknown; once the server
// is back, Run settles it and the failed calls succeed when made again.
// Nothing is lost, nothing is sent that was not journaled first, and no
// operation has two side effects.
func TestPostgresRestart(t *testing.T) {
	// Parallel: it waits on a PostgreSQL of its own (startPrivateServer)
	// as it stops and starts, idle meanwhile.
	t.Parallel()
	ctx := context.Background()
	pg, store, srv := startRestartRig(t)
	c, err := idem.New(store,
		idem.WithHTTPClient(srv.Client()),
		idem.WithResultEndpoint(srv.ResultTemplate()),
		idem.WithReconcile(200*time.Millisecond, time.Second, time.Hour),
		idem.WithMaxElapsed(3*time.Second),
		// The in-flight operation's lease could not be given up while
		// the server was down: Run takes it again once it expires.
		idem.WithLease("restart-test", 2*time.Second))
	require.NoError(t, err)
	defer c.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()

	req := func(i int) idem.Request {
		return idem.Request{Key: fmt.Sprintf("restart-%02d", i), URL: srv.URL + "/orders", Body: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	const before, down = 10, 10
	for i := range before {
		res, err := c.Submit(ctx, req(i))
		require.NoError(t, err, "Submit %d before the crash", i)
		require.Equal(t, idem.StateSucceeded, res.State)
	}

	// In flight when the server dies: the submit is journaled and sent,
	// its answer held long enough for the crash to land before the
	// outcome is written.
	inflight := req(before + down)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: inflight.Key, Delay: 2 * time.Second}))
	inflightDone := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, inflight)
		inflightDone <- err
	}()
	require.Eventually(t, func() bool { return srv.Stats().Submits == before+1 }, 10*time.Second, 5*time.Millisecond,
		"the in-flight submit reached the server")
	pg.Crash(t)

	requestsDown := len(srv.Requests())
	for i := before; i < before+down; i++ {
		res, err := c.Submit(ctx, req(i))
		require.Errorf(t, err, "Submit %d with PostgreSQL down", i)
		// What the caller reads: nothing journaled, retry with the key,
		// and the journal's own error.
		require.ErrorContains(t, err, "nothing was journaled", "Submit %d", i)
		require.ErrorContains(t, err, "pgjournal: create", "Submit %d", i)
		require.Falsef(t, errors.Is(err, idem.ErrUnknownOutcome), "Submit %d: nothing was journaled, so nothing is unknown: %v", i, err)
		require.Nil(t, res, "Submit %d: no result for an operation never journaled", i)
	}
	require.Equal(t, requestsDown, len(srv.Requests()), "requests sent while the journal was down")
	err = <-inflightDone
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "the in-flight Submit whose outcome could not be written")
	t.Logf("while down: %v", err)
	require.Eventually(t, func() bool { return c.Health().ConsecutiveErrors > 0 }, 30*time.Second, 10*time.Millisecond,
		"Run reports the journal errors")

	pg.Start(t)
	back := time.Now()
	// Run recovers by itself and settles the in-flight operation.
	require.Eventually(t, func() bool {
		rec, err := store.Get(ctx, idem.DefaultScope, inflight.Key)
		return err == nil && rec.State == journal.StateSucceeded
	}, 90*time.Second, 20*time.Millisecond, "Run settles the operation in flight at the crash")
	h := c.Health()
	t.Logf("Run settled it %v after the restart; its passes had met %d errors in a row", time.Since(back).Round(time.Millisecond), h.ConsecutiveErrors)
	require.Eventually(t, func() bool { return c.Health().ConsecutiveErrors == 0 }, 90*time.Second, 10*time.Millisecond,
		"Run's passes are clean again")
	for i := before; i < before+down; i++ {
		res, err := c.Submit(ctx, req(i))
		require.NoError(t, err, "Submit %d again once PostgreSQL is back", i)
		require.Equal(t, idem.StateSucceeded, res.State)
	}

	var keys []string
	for i := range before + down + 1 {
		keys = append(keys, req(i).Key)
	}
	checkSettledOnce(t, store, srv, keys)
	stop()
	require.ErrorIs(t, <-runDone, context.Canceled, "Run lived through the outage")
}

// TestPostgresRestartDefaults: PostgreSQL crashes (immediate stop: no
// checkpoint, recovery from the WAL) while operations are in flight at
// every stage: sent and awaiting their answers, being journaled by
// callers submitting one operation after another, and being submitted
// while the server is down; then it comes back. The client runs with its
// default settings (leases, reconcile interval, budgets), and its callers
// retry a failed Submit with the same key, as its errors tell them to.
// Every operation ends settled, with one side effect each; every request
// the server saw was journaled first.
func TestPostgresRestartDefaults(t *testing.T) {
	// Parallel: it waits on a PostgreSQL of its own (startPrivateServer)
	// as it stops and starts, idle meanwhile.
	t.Parallel()
	ctx := context.Background()
	pg, store, srv := startRestartRig(t)
	c := newClient(t, store, srv)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(runCtx) }()

	req := func(key string) idem.Request {
		return idem.Request{Key: key, URL: srv.URL + "/orders", Body: fmt.Appendf(nil, `{"key":%q}`, key)}
	}
	var keys []string

	// Sent, their answers held past the crash.
	const inflight = 16
	flightErrs := make(chan error, inflight)
	for i := range inflight {
		key := fmt.Sprintf("flight-%02d", i)
		keys = append(keys, key)
		require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: key, Delay: 3 * time.Second}))
		go func() {
			_, err := c.Submit(ctx, req(key))
			flightErrs <- err
		}()
	}
	require.Eventually(t, func() bool { return srv.Stats().Submits >= inflight }, 10*time.Second, 5*time.Millisecond,
		"the in-flight submits reached the server")

	// Callers submitting one operation after another, through it all:
	// a failed Submit is made again with its key, paced, until it settles.
	const workers, each = 4, 12
	var failed atomic.Int64 // Submits that failed or ended unknown
	workerErrs := make(chan error, workers)
	for w := range workers {
		var mine []string
		for j := range each {
			mine = append(mine, fmt.Sprintf("w%d-%02d", w, j))
		}
		keys = append(keys, mine...)
		go func() {
			pace := time.NewTicker(50 * time.Millisecond)
			defer pace.Stop()
			deadline := time.Now().Add(4 * time.Minute)
			for _, key := range mine {
				for {
					res, err := c.Submit(ctx, req(key))
					if err == nil && res.State == idem.StateSucceeded {
						break
					}
					failed.Add(1)
					if time.Now().After(deadline) {
						workerErrs <- fmt.Errorf("%s not settled by the deadline: %v", key, err)
						return
					}
					<-pace.C
				}
			}
			workerErrs <- nil
		}()
	}

	pg.Crash(t)
	// Down until the in-flight calls have returned and the callers have
	// met the outage.
	for range inflight {
		err := <-flightErrs
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "a Submit whose outcome could not be written")
	}
	require.Eventually(t, func() bool { return failed.Load() >= workers }, 30*time.Second, 5*time.Millisecond,
		"the callers met the outage")
	pg.Start(t)
	back := time.Now()

	for range workers {
		require.NoError(t, <-workerErrs)
	}
	require.Eventually(t, func() bool {
		open, err := store.List(ctx, journal.Filter{Open: true})
		return err == nil && len(open) == 0
	}, 3*time.Minute, 50*time.Millisecond, "Run settles every operation left open")
	t.Logf("all settled %v after the restart; %d Submits failed or ended unknown meanwhile", time.Since(back).Round(time.Millisecond), failed.Load())

	checkSettledOnce(t, store, srv, keys)
	stop()
	require.ErrorIs(t, <-runDone, context.Canceled, "Run lived through the outage")
}

// checkSettledOnce is the verdict of a restart: one side effect per
// operation of keys, each succeeded in the journal, and every request the
// server saw was for an operation journaled first.
func checkSettledOnce(t *testing.T, store *pgjournal.Store, srv *idemtest.Server, keys []string) {
	t.Helper()
	ctx := context.Background()
	for _, key := range keys {
		require.Equal(t, 1, srv.Effects("", key), "side effects of %s", key)
		rec, err := store.Get(ctx, idem.DefaultScope, key)
		require.NoError(t, err, key)
		require.Equal(t, journal.StateSucceeded, rec.State, key)
	}
	for _, r := range srv.Requests() {
		_, err := store.Get(ctx, idem.DefaultScope, r.Key)
		require.NoError(t, err, "%s %s: a request for an operation not journaled", r.Method, r.Key)
	}
}
