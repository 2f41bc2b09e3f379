package pgjournal_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// startPgBouncer starts a PgBouncer in transaction mode (the commonest
// production setup) in front of the test server, on 127.0.0.1, and
// returns the DSN of a database behind it: IDEM_PGBOUNCER's, or the one on
// PATH (apt-get install pgbouncer: 1.18, whose transaction mode keeps no
// prepared statement). Without one the test fails under IDEM_REQUIRE_PG
// (scripts/postgres.sh installs it), and is skipped otherwise, as every
// PostgreSQL test is without a server.
func startPgBouncer(t *testing.T) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn(t))
	require.NoError(t, err)
	return startPgBouncerTo(t, cfg.Host, cfg.Port)
}

// startPgBouncerTo is startPgBouncer in front of the server at host and
// port (a proxy of the test's, in front of the test server).
func startPgBouncerTo(t *testing.T, host string, serverPort uint16) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn(t))
	require.NoError(t, err)
	bouncer, _ := startMovablePgBouncer(t, host, serverPort, cfg.Database)
	return bouncer
}

// startMovablePgBouncer is startPgBouncerTo in front of database dbname,
// and a moveTo that points it at another database of the server, as a
// switchover does behind an unchanged address: the connections PgBouncer
// makes from then on reach that one.
func startMovablePgBouncer(t *testing.T, host string, serverPort uint16, dbname string) (bouncer string, moveTo func(dbname string)) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn(t))
	require.NoError(t, err)
	bin := os.Getenv("IDEM_PGBOUNCER")
	if bin == "" {
		if bin, err = exec.LookPath("pgbouncer"); err != nil {
			if os.Getenv("IDEM_REQUIRE_PG") != "" {
				t.Fatal("pgbouncer not found, and IDEM_REQUIRE_PG is set: install it (apt-get install pgbouncer) or name it in IDEM_PGBOUNCER; scripts/postgres.sh does both")
			}
			t.Skip("pgbouncer not installed: this test runs one in front of the test server")
		}
	}
	dir, err := os.MkdirTemp("", "idem-pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var as *syscall.Credential
	if os.Geteuid() == 0 { // pgbouncer refuses to run as root
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root: pgbouncer needs another user")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
		as = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	ini := filepath.Join(dir, "pgbouncer.ini")
	writeIni := func(dbname string) {
		require.NoError(t, os.WriteFile(ini, fmt.Appendf(nil, `[databases]
db = host=%s port=%d dbname=%s user=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = 3
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = %s
`, host, serverPort, dbname, cfg.User, port, filepath.Join(dir, "pgbouncer.log")), 0o644))
	}
	writeIni(dbname)
	cmd := exec.Command(bin, ini)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "pgbouncer listening")
	return fmt.Sprintf("postgres://%s@%s/db?sslmode=disable", cfg.User, addr), func(dbname string) {
		writeIni(dbname)
		require.NoError(t, cmd.Process.Signal(syscall.SIGHUP)) // RELOAD
	}
}

// TestPgBouncerTransactionMode: behind PgBouncer in transaction mode,
// with the DSN parameter the package documents for it
// (default_query_exec_mode=exec), replicas migrate at once and write,
// claim and read without an error; without it, calls fail with an error
// that names that parameter.
func TestPgBouncerTransactionMode(t *testing.T) {
	ctx := context.Background()
	bouncer := startPgBouncer(t)
	exec := bouncer + "&default_query_exec_mode=exec"
	open := func(dsn, schema string) *pgjournal.Store {
		s, err := pgjournal.Open(ctx, dsn, pgjournal.WithSchema(schema))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	admin := openStore(t) // drops its schema at cleanup
	t.Cleanup(func() {
		for i := range 5 {
			_ = admin.DropSchema(context.Background(), fmt.Sprintf("%s_m%d", admin.Schema(), i))
		}
	})

	// Replicas starting at once, each its own pool: the migrations'
	// lock serialises them though they share server connections.
	for i := range 5 {
		schema := fmt.Sprintf("%s_m%d", admin.Schema(), i)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		// Bounded: a lock left behind on a server connection makes a
		// Migrate wait for ever.
		mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		for r := range errs {
			s := open(exec, schema)
			wg.Go(func() { errs[r] = s.Migrate(mctx) })
		}
		wg.Wait()
		cancel()
		for r, err := range errs {
			require.NoError(t, err, "Migrate() of replica %d of schema %s, all at once behind PgBouncer", r, schema)
		}
	}

	var stores []*pgjournal.Store
	for range 3 {
		stores = append(stores, open(exec, admin.Schema()))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*4*10)
	for i, s := range stores {
		for g := range 4 {
			wg.Go(func() {
				for n := range 10 {
					k := fmt.Sprintf("k%d-%d-%d", i, g, n)
					now := time.Now()
					_, err := s.Create(ctx, journaltest.NewRecord("acct", k, now))
					if err == nil {
						_, err = s.Update(ctx, "acct", k, func(r *journal.Record) error {
							r.Review = "behind pgbouncer"
							return nil
						})
					}
					if err == nil {
						_, _, err = s.Claim(ctx, "acct", k, "o", now, now.Add(time.Minute))
					}
					if err == nil {
						var r *journal.Record
						r, err = s.Get(ctx, "acct", k)
						if err == nil && r.Review != "behind pgbouncer" {
							err = fmt.Errorf("%s: review %q", k, r.Review)
						}
					}
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a call behind PgBouncer with default_query_exec_mode=exec")
	}

	// pgx's default, its statement cache: calls fail, naming the fix.
	plain := []*pgjournal.Store{open(bouncer, admin.Schema()), open(bouncer, admin.Schema())}
	failed := 0
	for n := range 20 {
		_, err := plain[n%2].Get(ctx, "acct", "k0-0-0")
		if err != nil {
			failed++
			require.ErrorContains(t, err, "default_query_exec_mode=exec", "Get() behind PgBouncer with pgx's statement cache")
		}
	}
	t.Logf("%d of 20 Get()s failed with pgx's statement cache", failed)
}
