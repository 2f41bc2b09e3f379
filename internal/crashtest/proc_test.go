package crashtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idem/internal/crashtest"
	"github.com/idemkit/idem/internal/fakeserver"
	"github.com/idemkit/idem/journal"
)

// This file holds the parent's side of the process plumbing: the fake
// server command and the children, and reading what they leave behind.

// buildServer compiles cmd/idem-fakeserver into a temporary directory and
// returns the binary's path. It uses the go command on PATH with the
// environment's GOFLAGS.
func buildServer(t testing.TB) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the crash harness builds cmd/idem-fakeserver: put the go command on PATH")
	bin := filepath.Join(t.TempDir(), "idem-fakeserver")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/idemkit/idem/cmd/idem-fakeserver")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build cmd/idem-fakeserver:\n%s", out)
	return bin
}

// serverProc is a running idem-fakeserver process.
type serverProc struct {
	URL    string
	cmd    *exec.Cmd
	stderr *syncBuffer
	hc     *http.Client
}

// startServer starts the fake server command with args and waits for the
// line that gives its URL. The process is stopped in t.Cleanup.
func startServer(t testing.TB, bin string, args ...string) *serverProc {
	t.Helper()
	s := &serverProc{stderr: &syncBuffer{}, hc: &http.Client{Timeout: 10 * time.Second}}
	s.cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-exited
	})
	first := make(chan string, 1)
	go func() {
		defer close(exited)
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, r)
		_ = s.cmd.Wait()
	}()
	const prefix = "idem-fakeserver listening on "
	select {
	case line := <-first:
		require.Truef(t, strings.HasPrefix(line, prefix), "first line of idem-fakeserver: %q; stderr:\n%s", line, s.stderr)
		s.URL = strings.TrimPrefix(line, prefix)
	case <-time.After(30 * time.Second):
		t.Fatalf("idem-fakeserver printed no URL within 30 s; stderr:\n%s", s.stderr)
	}
	return s
}

func (s *serverProc) stats(t testing.TB) fakeserver.Stats {
	t.Helper()
	resp, err := s.hc.Get(s.URL + "/_stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /_stats")
	var st fakeserver.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// keyStats returns the server's counters of key in the workload's scope.
func (s *serverProc) keyStats(t testing.TB, key string) fakeserver.KeyStats {
	t.Helper()
	q := url.Values{"key": {key}, "scope": {crashtest.Credential}}
	resp, err := s.hc.Get(s.URL + "/_key?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /_key")
	var ks fakeserver.KeyStats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ks))
	return ks
}

func (s *serverProc) inject(t testing.TB, f fakeserver.Fault) {
	t.Helper()
	body, err := json.Marshal(f)
	require.NoError(t, err)
	resp, err := s.hc.Post(s.URL+"/_faults", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "POST /_faults %s", body)
}

// serverOp is what the server's result endpoint says of a key.
type serverOp struct {
	Status     int    `json:"-"` // 200, or 404 when the server has no such key (not an order's "status")
	State      string `json:"state"`
	ResourceID string `json:"resourceId"`
	// OrderID is an order API's order (client-order-id), read as
	// crashtest.DecodeOrder reads it.
	OrderID int64 `json:"orderId"`
}

// operation asks the server's result endpoint about key, in the workload's
// scope. It counts as a query in the server's stats.
func (s *serverProc) operation(t testing.TB, key string) serverOp {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/operations/"+url.PathEscape(key), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", crashtest.Credential)
	resp, err := s.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	op := serverOp{Status: resp.StatusCode}
	switch resp.StatusCode {
	case http.StatusOK:
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&op), "GET /operations/%s", key)
		if op.OrderID > 0 {
			// An order placed, whatever its status since.
			op.State, op.ResourceID = "succeeded", strconv.FormatInt(op.OrderID, 10)
		}
	case http.StatusBadRequest:
		// An order API's -2013 "Order does not exist.": no such key.
		var e struct{ Code int }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e), "GET /operations/%s", key)
		require.Equal(t, -2013, e.Code, "GET /operations/%s: a 400 other than -2013", key)
		op.Status = http.StatusNotFound
	case http.StatusNotFound:
	default:
		t.Fatalf("GET /operations/%s: status %d", key, resp.StatusCode)
	}
	return op
}

// The child's environment.
const (
	envMode     = "IDEM_CRASHTEST_CHILD"   // "work", "resume" or "point"
	envJournal  = "IDEM_CRASHTEST_JOURNAL" // the journal file
	envURL      = "IDEM_CRASHTEST_URL"     // the fake server's base URL
	envOps      = "IDEM_CRASHTEST_OPS"     // work: operations 0..n-1
	envResubmit = "IDEM_CRASHTEST_RESUBMIT"
	envPoint    = "IDEM_CRASHTEST_POINT" // point: where to crash
	envKey      = "IDEM_CRASHTEST_KEY"   // point: the operation
	// envKeyWindow is the key window the client is told (a Go duration);
	// unset leaves the client's default.
	envKeyWindow = "IDEM_CRASHTEST_KEY_WINDOW"
	// envBehavior names the server's behaviour preset, so that the child
	// configures its client for it (crashtest.BehaviorOptions).
	envBehavior = "IDEM_CRASHTEST_BEHAVIOR"
)

// child is a running child process: this test binary running
// TestCrashChild.
type child struct {
	cmd    *exec.Cmd
	lines  chan string // complete stdout lines; closed at EOF
	stderr *syncBuffer
	exited chan struct{} // closed once the process is reaped
	err    error         // from Wait, valid after exited
}

// startChild starts a child with env added to this process's environment.
// It is killed, if still running, in t.Cleanup.
func startChild(t testing.TB, env ...string) *child {
	t.Helper()
	c := &child{lines: make(chan string, 1<<16), stderr: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = c.stderr
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	t.Cleanup(c.kill)
	go func() {
		defer close(c.exited)
		// A killed child may leave half a line: ReadString returns it with
		// an error, and it is dropped.
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			c.lines <- strings.TrimSuffix(line, "\n")
		}
		close(c.lines)
		c.err = c.cmd.Wait()
	}()
	return c
}

// kill sends SIGKILL and waits until the process is reaped, so that its
// journal lock is released. Killing an exited child does nothing.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	for range c.lines {
	}
	<-c.exited
}

// killed reports whether the child died of SIGKILL; valid after exited.
func (c *child) killed() bool {
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// wait reads the child's lines until it exits, giving each to fn, and
// fails if it takes longer than timeout.
func (c *child) wait(t testing.TB, timeout time.Duration, fn func(string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				<-c.exited
				return
			}
			fn(line)
		case <-deadline.C:
			c.kill()
			t.Fatalf("child did not finish within %v; stderr:\n%s", timeout, c.stderr)
		}
	}
}

// requireClean fails unless the child exited with status 0.
func (c *child) requireClean(t testing.TB) {
	t.Helper()
	require.NoError(t, c.err, "child exit; stderr:\n%s", c.stderr)
}

// readJournal opens the journal read-only, as the operator tool does, and
// returns every record by key. It closes the file before returning, so a
// child can open it next.
func readJournal(t testing.TB, path string) map[string]*journal.Record {
	t.Helper()
	s, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	recs, err := s.List(t.Context(), journal.Filter{})
	require.NoError(t, err)
	out := make(map[string]*journal.Record, len(recs))
	for _, r := range recs {
		out[r.Key] = r
	}
	return out
}

// checkBolt runs bbolt's own consistency check over the journal file: the
// journal package exposes none, and a SIGKILL must never damage the file.
func checkBolt(t testing.TB, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}), "bbolt consistency check of %s", path)
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<20 {
		return len(p), nil // enough to diagnose
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// keyIndex returns i for crashtest.Key(i), or -1.
func keyIndex(key string) int {
	var i int
	if _, err := fmt.Sscanf(key, "op-%d", &i); err != nil || crashtest.Key(i) != key {
		return -1
	}
	return i
}
