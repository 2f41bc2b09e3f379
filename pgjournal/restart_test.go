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
	ctx := context.Background()
	pg := startPrivateServer(t)
	store, err := pgjournal.Open(ctx, pg.DSN)
	require.NoError(t, err)
	defer store.Close()
	require.NoError(t, store.Migrate(ctx))
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
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

	// The verdict: one side effect per operation, each settled in the
	// journal, and every request the server saw was journaled first.
	for i := range before + down + 1 {
		key := req(i).Key
		require.Equal(t, 1, srv.Effects("", key), "side effects of %s", key)
		rec, err := store.Get(ctx, idem.DefaultScope, key)
		require.NoError(t, err, key)
		require.Equal(t, journal.StateSucceeded, rec.State, key)
	}
	for _, r := range srv.Requests() {
		_, err := store.Get(ctx, idem.DefaultScope, r.Key)
		require.NoError(t, err, "%s %s: a request for an operation not journaled", r.Method, r.Key)
	}
	stop()
	require.ErrorIs(t, <-runDone, context.Canceled, "Run lived through the outage")
}
