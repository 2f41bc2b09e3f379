//go:build linux

package idem_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// diskFullChild, set in a child's environment, makes TestRunSurvivesDiskFull
// run its workload under a file-size limit in that child: a limit set in
// the test binary itself would fail other tests' writes.
const diskFullChild = "IDEM_TEST_DISK_FULL_CHILD"

// Issue 10, done when: a workload runs, the disk fills while operations
// are unknown, Run meets the full disk, the disk is freed, and every
// operation settles exactly once, without a restart. A small tmpfs is the
// real thing where mounting is permitted; a file-size limit
// (RLIMIT_FSIZE, in a child process) stands in for it everywhere, so the
// test runs even where mount is refused.
func TestRunSurvivesDiskFull(t *testing.T) {
	if os.Getenv(diskFullChild) != "" {
		t.Log("disk-full child: file-size limit")
		runDiskFull(t, newFsizeDisk(t))
		return
	}
	t.Run("tmpfs", func(t *testing.T) {
		d, err := mountTmpfs(t)
		if err != nil {
			// Not silent: the fsize-limit subtest below always runs.
			t.Skipf("mount refused (%v); the fsize-limit subtest stands in", err)
		}
		runDiskFull(t, d)
	})
	t.Run("fsize-limit", func(t *testing.T) {
		out := childOutput(t, "TestRunSurvivesDiskFull", diskFullChild)
		require.Contains(t, out, "disk-full child: file-size limit", "child:\n%s", out)
		t.Logf("child:\n%s", out)
	})
}

var openStates = []idem.State{idem.StatePending, idem.StateProcessing, idem.StateUnknown}

// A fullDisk holds the journal and can run out of room.
type fullDisk interface {
	dir() string
	fill(t *testing.T) // from now on the journal file cannot grow
	free(t *testing.T)
	errno() syscall.Errno // what a write that needs room fails with
}

// tmpfsDisk is a small tmpfs, filled by a filler file.
type tmpfsDisk struct{ mnt string }

func mountTmpfs(t *testing.T) (*tmpfsDisk, error) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return nil, err
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return &tmpfsDisk{mnt: mnt}, nil
}

func (d *tmpfsDisk) dir() string          { return d.mnt }
func (d *tmpfsDisk) errno() syscall.Errno { return syscall.ENOSPC }
func (d *tmpfsDisk) filler() string       { return filepath.Join(d.mnt, "filler") }

func (d *tmpfsDisk) fill(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(d.filler(), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for range 4 << 20 / len(chunk) { // bounded by the tmpfs's size
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC, "filling the tmpfs")
}

func (d *tmpfsDisk) free(t *testing.T) {
	t.Helper()
	require.NoError(t, os.Remove(d.filler()))
}

// fsizeDisk limits the size of files this process writes to the pages the
// journal uses now: like a full file system, the journal can rewrite its
// pages but not grow. Writes past the limit fail with EFBIG, not the
// SIGXFSZ that would kill the process.
type fsizeDisk struct {
	d       string
	journal string
	old     syscall.Rlimit
}

func newFsizeDisk(t *testing.T) *fsizeDisk {
	signal.Ignore(syscall.SIGXFSZ)
	d := &fsizeDisk{d: t.TempDir()}
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &d.old))
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &d.old) })
	return d
}

func (d *fsizeDisk) dir() string          { return d.d }
func (d *fsizeDisk) errno() syscall.Errno { return syscall.EFBIG }

func (d *fsizeDisk) fill(t *testing.T) {
	t.Helper()
	used, err := boltHighWater(d.journal)
	require.NoError(t, err)
	lim := syscall.Rlimit{Cur: uint64(used), Max: d.old.Max}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim))
}

func (d *fsizeDisk) free(t *testing.T) {
	t.Helper()
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &d.old))
}

// boltHighWater reads how many bytes of the bbolt file at p hold pages
// (its high-water mark, below the file's size, which bbolt grows ahead):
// the newer of the two meta pages holds it. bbolt's meta layout: a 16-byte
// page header, then magic, version, page size, flags (4 bytes each), the
// root bucket (16), the freelist page (8), the high-water page id (8), the
// transaction id (8).
func boltHighWater(p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 80)
	var best, bestTx uint64
	for _, off := range []int64{0, -1} {
		if off < 0 {
			off = int64(binary.LittleEndian.Uint32(buf[24:28])) // page size, from meta 0
		}
		if _, err := f.ReadAt(buf, off); err != nil {
			return 0, err
		}
		if binary.LittleEndian.Uint32(buf[16:20]) != 0xED0CDAED {
			return 0, fmt.Errorf("%s: no bbolt meta page at %d", p, off)
		}
		pageSize := uint64(binary.LittleEndian.Uint32(buf[24:28]))
		if tx := binary.LittleEndian.Uint64(buf[64:72]); tx >= bestTx {
			bestTx, best = tx, binary.LittleEndian.Uint64(buf[56:64])*pageSize
		}
	}
	return int64(best), nil
}

// requireDiskFull asserts that err is the full disk's. bbolt reports a
// failed grow of the file as text ("file resize error: %s"), so the errno
// is matched by its message when errors.Is cannot find it.
func requireDiskFull(t *testing.T, err error, errno syscall.Errno) {
	t.Helper()
	require.Error(t, err)
	if !errors.Is(err, errno) {
		require.Contains(t, err.Error(), errno.Error())
	}
}

// lossyTransport forwards every request and, while on, loses the answer
// for some keys: the server acts and the client learns nothing, as when
// the connection drops after the server committed. Result queries of those
// keys lose their answers too, so the operations stay unknown.
type lossyTransport struct {
	base http.RoundTripper
	on   atomic.Bool
	keys map[string]bool // read-only once the workload starts
}

func (l *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	if req.Method == http.MethodGet {
		key = path.Base(req.URL.Path)
	}
	resp, err := l.base.RoundTrip(req)
	if err != nil || !l.on.Load() || !l.keys[key] {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, errors.New("read tcp 127.0.0.1: connection reset by peer")
}

// runDiskFull is the workload: some operations the server keeps
// processing, some whose answers are lost (settled later by a query, or by
// a resend the server replays), the disk filling up under them, Run
// meeting the full disk, more work arriving while it is full, and the disk
// freed.
func runDiskFull(t *testing.T, disk fullDisk) {
	const n, late = 24, 8 // before the disk fills, and on the full disk
	const lag = 12 * time.Hour
	clock := idemtest.NewClock(epoch)
	srv := newServer(t, idemtest.WithClock(clock.Now), idemtest.WithRetention(30*24*time.Hour))
	lossy := &lossyTransport{base: srv.Client().Transport, keys: map[string]bool{}}
	lossy.on.Store(true)
	for i := range n + late {
		if i%3 != 0 || i >= n {
			lossy.keys[fmt.Sprintf("order-%02d", i)] = true
		}
	}

	jpath := filepath.Join(disk.dir(), "idem.journal")
	if fd, ok := disk.(*fsizeDisk); ok {
		fd.journal = jpath
	}
	store, err := journal.Open(jpath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	var smu sync.Mutex
	settles := map[string]int{}
	c, err := idem.New(store,
		idem.WithHTTPClient(&http.Client{Transport: lossy}),
		idem.WithClock(clock),
		idem.WithResultEndpoint(srv.URL+"/operations/{key}"),
		idem.WithSettleFunc(func(r *idem.Result) {
			smu.Lock()
			defer smu.Unlock()
			settles[r.Key]++
		}),
	)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	body := func(i int) []byte {
		return fmt.Appendf(nil, `{"amount":%d,"note":%q}`, i, strings.Repeat("x", 600))
	}

	// The workload: every operation ends unknown (or processing) with its
	// side effect done on the server.
	var keys []string
	for i := range n {
		key := fmt.Sprintf("order-%02d", i)
		keys = append(keys, key)
		switch i % 3 {
		case 0:
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: key, Delay: lag}))
		case 2:
			require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: key, Delay: lag}))
		}
		res, err := c.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: body(i)})
		require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit(%s)", key)
		require.False(t, res.State.Terminal(), "Submit(%s) state %s", key, res.State)
	}

	disk.fill(t)
	// More work arrives on the full disk. A Submit whose record could not
	// be journaled must leave nothing behind and send nothing; one that
	// was journaled joins the operations that must settle.
	var refused []string
	for i := n; i < n+late; i++ {
		key := fmt.Sprintf("order-%02d", i)
		_, err := c.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: body(i)})
		if err == nil || errors.Is(err, idem.ErrUnknownOutcome) {
			keys = append(keys, key)
			continue
		}
		requireDiskFull(t, err, disk.errno())
		refused = append(refused, key)
	}
	t.Logf("on the full disk: %d submits refused, %d journaled", len(refused), late-len(refused))

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ran := runAsync(runCtx, c)
	h := waitHealth(t, c, ran, "Run meeting the full disk", func(h idem.Health) bool { return h.ConsecutiveErrors > 0 })
	requireDiskFull(t, h.LastJournalError, disk.errno())
	require.True(t, h.RunActive)

	disk.free(t)
	lossy.on.Store(false)
	clock.Advance(lag)

	// Settled means journaled as settled and reported to the settle
	// callback, which runs just after the commit.
	reported := func() map[string]int {
		smu.Lock()
		defer smu.Unlock()
		return maps.Clone(settles)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		open, err := c.List(ctx, idem.Filter{States: openStates})
		require.NoError(t, err)
		if len(open) == 0 && len(reported()) == len(keys) {
			break
		}
		select {
		case err := <-ran:
			t.Fatalf("Run() returned %v with %d operations open", err, len(open))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the disk was freed: %d operations open, %d of %d settlements reported; Health() = %+v",
				len(open), len(reported()), len(keys), c.Health())
		}
		time.Sleep(time.Millisecond) // polling interval, not a condition
	}

	h = waitHealth(t, c, ran, "a clean pass after the disk was freed", func(h idem.Health) bool { return h.ConsecutiveErrors == 0 })
	require.True(t, h.RunActive, "Run still running: %+v", h)
	require.True(t, h.LastPass.After(h.LastJournalErrorAt), "Health() = %+v", h)
	requireDiskFull(t, h.LastJournalError, disk.errno())

	for _, key := range keys {
		op, err := c.Lookup(ctx, idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, op.State, "%s", key)
		require.Equal(t, 1, srv.Effects("", key), "side effects of %s", key)
	}
	got := reported()
	for _, key := range keys {
		require.Equal(t, 1, got[key], "settlements reported for %s", key)
	}
	require.Len(t, got, len(keys), "settlements reported: %v", got)
	for _, key := range refused {
		_, err := c.Lookup(ctx, idem.DefaultScope, key)
		require.ErrorIs(t, err, idem.ErrNotFound, "%s was refused: nothing journaled", key)
		require.Zero(t, srv.Effects("", key), "%s was refused: nothing sent", key)
	}
	st := srv.Stats()
	require.Equal(t, 1, st.MaxEffectsPerKey)
	require.Equal(t, len(keys), st.SideEffects)

	stopRun()
	require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())
	require.NoError(t, journal.Check(jpath), "the journal after the full disk")
}
