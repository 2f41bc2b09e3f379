package journal_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// The tests below re-run this test binary as a child process, selected by
// these variables, because a file lock and a SIGKILL are only real between
// processes.
const (
	childModeEnv = "IDEM_JOURNAL_CHILD"      // "lock", "kill", "ack" or "rotate"
	childPathEnv = "IDEM_JOURNAL_CHILD_PATH" // the journal file
	childRunEnv  = "IDEM_JOURNAL_CHILD_RUN"  // kill: run number, to make keys unique
)

// TestChildProcess is the child's body; it does nothing in a normal run.
func TestChildProcess(t *testing.T) {
	mode, path := os.Getenv(childModeEnv), os.Getenv(childPathEnv)
	if mode == "" {
		t.Skip("child process of TestLockedByOtherProcess and TestKill")
	}
	var opts []journal.Option
	switch mode {
	case "ack":
		opts = append(opts, journal.WithApplyDelayForTest(time.Hour))
	case "rotate":
		opts = append(opts, journal.WithApplyDelayForTest(time.Hour), journal.WithOverlayMaxForTest(rotateOverlayMax))
	}
	s, err := journal.Open(path, opts...)
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(2)
	}
	switch mode {
	case "lock":
		// Hold the lock until the parent closes our stdin.
		fmt.Println("READY")
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := s.Close(); err != nil {
			fmt.Printf("ERROR %v\n", err)
			os.Exit(2)
		}
	case "kill":
		fmt.Println("READY")
		killChild(s, os.Getenv(childRunEnv))
	case "ack":
		// A few writes, each acknowledged, then wait to be killed: the
		// applier (an hour away) never copies them into the file.
		fmt.Println("READY")
		for i := range 3 {
			key := fmt.Sprintf("order-%d", i)
			if _, err := s.Create(context.Background(), journaltest.NewRecord("acct", key, t0)); err != nil {
				fmt.Printf("ERROR %v\n", err)
				os.Exit(2)
			}
			fmt.Printf("ACK %s\n", key)
		}
		fmt.Println("DONE")
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "rotate":
		fmt.Println("READY")
		rotateChild(s, path)
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
}

// killChild writes as fast as it can from several goroutines until it is
// killed. Each "ACK <state> <key>" line is printed only after the write
// that made that state durable returned.
func killChild(s *journal.Store, run string) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("r%s-g%d-%06d", run, g, i)
				due := t0.Add(time.Duration(rand.IntN(1000)) * time.Second)
				if _, err := s.Create(ctx, journaltest.NewRecord("acct", key, due)); err != nil {
					fmt.Printf("ERROR %v\n", err)
					os.Exit(2)
				}
				fmt.Printf("ACK pending %s\n", key)
				for _, st := range []journal.State{journal.StateProcessing, journal.StateSucceeded} {
					_, err := s.Update(ctx, "acct", key, func(r *journal.Record) error {
						r.State = st
						r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: t0})
						r.NextDue = r.NextDue.Add(time.Minute)
						if st.Terminal() {
							r.Settled = t0
						}
						return nil
					})
					if err != nil {
						fmt.Printf("ERROR %v\n", err)
						os.Exit(2)
					}
					fmt.Printf("ACK %s %s\n", st, key)
				}
			}
		})
	}
	wg.Wait()
}

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // complete lines of stdout, closed at EOF
	stderr strings.Builder
}

// startChild starts the child and waits until it has opened the journal.
func startChild(t testing.TB, mode, path string, env ...string) *child {
	t.Helper()
	c := &child{lines: make(chan string, 1024)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), append(env, childModeEnv+"="+mode, childPathEnv+"="+path)...)
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		defer close(c.lines)
		// A killed child may leave half a line: ReadString returns it
		// with an error, and it is dropped.
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	select {
	case line, ok := <-c.lines:
		if !ok || line != "READY" {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
			t.Fatalf("child did not start: first line %q; stderr:\n%s", line, c.stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Fatal("child did not report READY within 30 s")
	}
	return c
}

func TestLockedByOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	c := startChild(t, "lock", path)

	const wait = 200 * time.Millisecond
	for _, opts := range [][]journal.Option{
		{journal.WithLockTimeout(wait)},
		{journal.WithLockTimeout(wait), journal.ReadOnly()},
	} {
		start := time.Now()
		s, err := journal.Open(path, opts...)
		elapsed := time.Since(start)
		if err == nil {
			s.Close()
		}
		require.ErrorIs(t, err, journal.ErrLocked, "Open() of a journal another process holds")
		require.Contains(t, err.Error(), path, "the error names the path")
		require.Contains(t, err.Error(), "another process", "the error says who holds it")
		require.NotContains(t, err.Error(), ": journal:", "the error says it once")
		require.GreaterOrEqual(t, elapsed, wait/2, "Open() waited for the lock")
		require.Less(t, elapsed, wait+5*time.Second, "Open() gave up within its wait")
	}

	// Without a wait, one try only.
	start := time.Now()
	_, err := journal.Open(path, journal.WithLockTimeout(0))
	require.ErrorIs(t, err, journal.ErrLocked)
	require.Less(t, time.Since(start), 5*time.Second)

	// Once the other process lets go, Open succeeds.
	require.NoError(t, c.stdin.Close())
	for range c.lines {
	}
	require.NoError(t, c.cmd.Wait(), "child: %s", c.stderr.String())
	s, err := journal.Open(path, journal.WithLockTimeout(wait))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

var stateRank = map[journal.State]int{journal.StatePending: 1, journal.StateProcessing: 2, journal.StateSucceeded: 3}

func TestKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	const kills = 25
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("IDEM_KILL_SEED"); v != "" {
		_, err := fmt.Sscan(v, &seed)
		require.NoError(t, err, "IDEM_KILL_SEED")
	}
	t.Logf("seed %d (set IDEM_KILL_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "journal.db")
	acked := map[string]journal.State{}
	deadline := time.Now().Add(25 * time.Second)

	for run := range kills {
		require.True(t, time.Now().Before(deadline), "kill test over its time budget at run %d", run)
		c := startChild(t, "kill", path, fmt.Sprintf("%s=%02d", childRunEnv, run))
		// The fault: SIGKILL at a random moment of the write storm.
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
		n := 0
		for line := range c.lines {
			f := strings.Fields(line)
			require.True(t, len(f) == 3 && f[0] == "ACK", "child: %q; stderr:\n%s", line, c.stderr.String())
			acked[f[2]] = journal.State(f[1])
			n++
		}
		_ = c.cmd.Wait()
		t.Logf("run %d: %d acknowledgements", run, n)
		checkAcked(t, path, acked)
	}
	require.NotEmpty(t, acked, "the children acknowledged nothing")
}

// checkAcked reopens the journal and checks that every acknowledged write
// survived, the indexes match the records, and bbolt finds no damage:
// first read-only, where the reads merge the log the killed child left
// with the file, then for writing, which applies the log.
func checkAcked(t testing.TB, path string, acked map[string]journal.State) {
	t.Helper()
	for _, ro := range []bool{true, false} {
		var opts []journal.Option
		if ro {
			opts = append(opts, journal.ReadOnly())
		}
		s, err := journal.Open(path, opts...)
		require.NoError(t, err, "reopen after kill (read-only %v)", ro)
		checkAckedIn(t, s, acked)
	}
	requireConsistent(t, path)
}

// checkAckedIn is checkAcked's check of one Store, which it closes.
func checkAckedIn(t testing.TB, s *journal.Store, acked map[string]journal.State) {
	t.Helper()
	ctx := context.Background()
	for key, st := range acked {
		r, err := s.Get(ctx, "acct", key)
		require.NoError(t, err, "acknowledged record %s", key)
		require.GreaterOrEqual(t, stateRank[r.State], stateRank[st], "%s: state %s, acknowledged %s", key, r.State, st)
		require.GreaterOrEqual(t, len(r.Attempts), stateRank[st]-1, "%s: attempts", key)
	}
	// The open index holds exactly the open records.
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	var open, walked []string
	for _, r := range all {
		if r.Open() {
			open = append(open, r.Key)
		}
	}
	require.NoError(t, s.ForEachOpen(ctx, func(r *journal.Record) error {
		walked = append(walked, r.Key)
		return nil
	}))
	require.ElementsMatch(t, open, walked, "open index after kill")
	due, err := s.Due(ctx, t0.Add(24*time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, due, len(open), "Due() after kill")
	require.NoError(t, s.Close())
}
