package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/idemtest"
)

// rounds is how many times each comparison runs, interleaved: round r runs
// every contender once, starting from a different one each round, so that
// drift on a noisy machine spreads over all of them.
var rounds = flag.Int("rounds", 5, "rounds of each interleaved comparison")

// servers is the child process that answers every HTTP benchmark.
var servers struct {
	plain string // POST: 201 succeeded; GET /operations/{key}: 200 succeeded
	fake  string // idemtest's fake server, no faults
	hold  string // like plain, but holds each answer until /_release
	pid   int
}

const roleEnv = "IDEMBENCH_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "server" {
		serve()
		return
	}
	flag.Parse()
	if !testing.Short() && flag.Lookup("test.bench").Value.String() != "" {
		cmd, err := startServers()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: start servers:", err)
			os.Exit(1)
		}
		code := m.Run()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// startServers re-executes the test binary as the server process and reads
// its three URLs from its first line of output.
func startServers() (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"=server")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("read server URLs: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("server said %q", line)
	}
	servers.plain, servers.fake, servers.hold, servers.pid = f[0], f[1], f[2], cmd.Process.Pid
	return cmd, nil
}

// serve runs in the child: three servers on 127.0.0.1 until killed.
func serve() {
	plain := listen(http.HandlerFunc(plainHandler))
	fake, err := idemtest.NewServer(idemtest.WithMaxKeys(10_000_000))
	if err != nil {
		// The parent reads no URLs and reports the start failure.
		fmt.Fprintln(os.Stderr, "bench: server process:", err)
		os.Exit(1)
	}
	var h holder
	h.release = make(chan struct{})
	hold := listen(&h)
	fmt.Println(plain, fake.URL, hold)
	select {}
}

func listen(h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = (&http.Server{Handler: h, ReadHeaderTimeout: time.Minute}).Serve(ln) }()
	return "http://" + ln.Addr().String()
}

var resourceSeq atomic.Int64

// Requests under slowPrefix are answered after serverLatency.
const (
	slowPrefix    = "/slow"
	serverLatency = 2 * time.Millisecond
)

// plainHandler is the fast server: it reads the body and answers the way
// an idempotent API answers a successful create, and the way its result
// endpoint answers a query. It does as little as a server can, so that the
// benchmarks measure the clients.
func plainHandler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if strings.HasPrefix(r.URL.Path, slowPrefix+"/") {
		time.Sleep(serverLatency) // the server's own work: a real API's latency
	}
	id := strconv.FormatInt(resourceSeq.Add(1), 10)
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	_, _ = io.WriteString(w, `{"state":"succeeded","resourceId":"ord_`+id+`"}`)
}

// holder answers like plainHandler, but only once /_release is posted;
// GET /_held says how many requests it holds.
type holder struct {
	held    atomic.Int64
	mu      sync.Mutex
	release chan struct{}
}

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_held":
		fmt.Fprint(w, h.held.Load())
		return
	case "/_release":
		h.mu.Lock()
		close(h.release)
		h.release = make(chan struct{})
		h.mu.Unlock()
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	ch := h.release
	h.mu.Unlock()
	h.held.Add(1)
	<-ch
	h.held.Add(-1)
	plainHandler(w, r)
}

// control calls one of the hold server's control endpoints.
func control(ctx context.Context, path string) (string, error) {
	method := http.MethodGet
	if path == "/_release" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, servers.hold+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serverCPU returns the server process's CPU time so far, from
// /proc/PID/stat (clock ticks, 10 ms on Linux).
func serverCPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", servers.pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields after the command: state is f[0]; utime and stime are the
	// 14th and 15th fields of the whole line, f[11] and f[12] here.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
