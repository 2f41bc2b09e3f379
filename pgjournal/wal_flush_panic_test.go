package pgjournal_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// failNextFdatasync makes the next fdatasync of the PostgreSQL backend pid
// fail with EIO (strace's fault injection), as a disk that fails the WAL
// flush would. It returns once strace has attached; the tracer is ended
// at cleanup.
func failNextFdatasync(t *testing.T, pid uint32) {
	t.Helper()
	if _, err := exec.LookPath("strace"); err != nil {
		if os.Getenv("IDEM_REQUIRE_STRACE") != "" {
			t.Fatal("strace not found: install it (apt-get install strace)")
		}
		t.Skip("strace not found: the WAL flush failure is injected with it")
	}
	cmd := exec.Command("strace", "-qq", "-e", "trace=fdatasync", "-e", "inject=fdatasync:error=EIO:when=1",
		"-p", strconv.FormatUint(uint64(pid), 10))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	drained := make(chan struct{})
	go func() {
		// Drain strace's report of the injected call, so it never blocks.
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log("strace: " + sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-drained // strace gone, its stderr ends
		_ = cmd.Wait()
	})
	// With -qq strace prints nothing on attaching: it is attached once
	// the backend's status names it as its tracer.
	tracer := strconv.Itoa(cmd.Process.Pid)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
		return err == nil && strings.Contains(string(b), "TracerPid:\t"+tracer+"\n")
	}, 10*time.Second, 5*time.Millisecond, "strace attached to backend %d", pid)
}

// TestWALFlushPanicInCommit: the disk fails the WAL flush of the
// journal's COMMIT (fdatasync returns EIO). PostgreSQL answers the COMMIT
// with a PANIC, "could not fdatasync file ...: Input/output error"
// (SQLSTATE 58030, issue_xlog_fsync in src/backend/access/transam/xlog.c),
// and the whole server restarts and recovers from the WAL, which holds
// the commit record whose flush failed
// (https://www.postgresql.org/docs/15/runtime-config-error-handling.html#GUC-DATA-SYNC-RETRY:
// "PostgreSQL will now PANIC on fsync failure ... recovery from the WAL").
// The PANIC is an error the server sent, but not its word that the
// write was not made: the write was committed. The Submit is told the
// outcome is unknown (never "nothing was journaled", which invites the
// order again under a new key) and sends nothing; once the server is
// back, the same pool reaches it without a restart of the application,
// the operation is there, and the same Submit settles it with one order.
func TestWALFlushPanicInCommit(t *testing.T) {
	ctx := context.Background()
	pg := startPrivateServer(t)
	pc, err := pgxpool.ParseConfig(pg.DSN)
	require.NoError(t, err)
	pc.MaxConns = 1 // one backend, the one whose WAL flush fails
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store, err := pgjournal.New(pool)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.Migrate(ctx))
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := newClient(t, store, srv)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	pid := conn.Conn().PgConn().PID()
	conn.Release()
	failNextFdatasync(t, pid)

	_, err = c.Submit(ctx, order(srv, "sent"))
	t.Logf("Submit(): %v", err)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose COMMIT the server answered with a PANIC")
	require.NotContains(t, err.Error(), "nothing was journaled")
	require.Empty(t, requestsFor(srv, "sent"), "requests of an operation whose journal write is unconfirmed")

	// EventuallyWithT reports the last Get's error; a message argument
	// would be evaluated once, before the first Get.
	var rec *journal.Record
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := store.Get(ctx, idem.DefaultScope, "sent")
		if assert.NoError(c, err, "the operation read back after crash recovery") {
			rec = r
		}
	}, 60*time.Second, 20*time.Millisecond)
	require.Equal(t, journal.StatePending, rec.State, "the write the PANIC answered was committed")

	res, err := c.Submit(ctx, order(srv, "sent"))
	require.NoError(t, err, "the same Submit again")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, srv.Effects("", "sent"), "orders for the operation")
}
