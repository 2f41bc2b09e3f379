package idem_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// The test below fails, in turn, each system call of the log writes that
// journal a new operation, in a child process run under strace's fault
// injection: a disk that returns EIO at that step. It checks the rule
// callers rely on (DESIGN promise 13): an error that does not match
// ErrUnknownOutcome means nothing was journaled and nothing will ever be
// sent. (A failed fsync of bbolt's meta page once broke it, when bbolt
// commits were the journal's write path: the call said "journal error",
// yet the record was current in the process and on disk after it
// exited, and the reconciler sent it.)
const (
	commitFailModeEnv = "IDEM_COMMITFAIL_CHILD" // "submit" or "prepare"
	commitFailPathEnv = "IDEM_COMMITFAIL_PATH"  // the journal, created by the parent
	commitFailURLEnv  = "IDEM_COMMITFAIL_URL"   // the parent's fake server
	commitFailKey     = "order-commitfail-0001"
	// commitFailMark is printed just before the call, so that the parent
	// can tell, in strace's log, the call's system calls from any before.
	commitFailMark = "COMMITFAIL-MARK"
	// requireStraceEnv makes a missing strace, or a ptrace the system
	// refuses, a failure rather than a skip. CI sets it.
	requireStraceEnv = "IDEM_REQUIRE_STRACE"
)

// TestCommitFailureChild is the child's body; it does nothing in a normal
// run. It opens the journal, makes the one call, reports what it returned,
// then runs Resume, as a reconciler would, so that the parent sees whether
// anything the call reported as not journaled is sent anyway.
func TestCommitFailureChild(t *testing.T) {
	mode := os.Getenv(commitFailModeEnv)
	if mode == "" {
		t.Skip("child process of TestCommitFailureInjected")
	}
	url := os.Getenv(commitFailURLEnv)
	store, err := journal.Open(os.Getenv(commitFailPathEnv))
	if err != nil {
		fmt.Printf("ERROR open: %v\n", err)
		os.Exit(2)
	}
	c, err := idem.New(store,
		idem.WithResultEndpoint(url+"/operations/{key}"),
		idem.WithClock(idemtest.NewClock(time.Now())), // waits cost nothing
		idem.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }),
		idem.WithAttemptTimeout(10*time.Second),
		idem.WithMaxAttempts(4),
	)
	if err != nil {
		fmt.Printf("ERROR new: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := idem.Request{Key: commitFailKey, URL: url + "/orders", Body: []byte(`{"amount":1250}`)}
	// strace counts a call's invocations per thread: the call's commits
	// (a lone writer commits on its own goroutine) must all be made on
	// the thread that prints the mark. Resume, below, runs on others.
	runtime.LockOSThread()
	fmt.Println(commitFailMark)
	switch mode {
	case "submit":
		_, err = c.Submit(ctx, req)
	case "prepare":
		_, err = c.Prepare(ctx, req)
	}
	var e *idem.Error
	switch {
	case err == nil:
		fmt.Println("RESULT ok")
	case errors.Is(err, idem.ErrUnknownOutcome) && errors.As(err, &e) && e.Key == commitFailKey:
		fmt.Printf("RESULT unknown %v\n", err)
	case errors.Is(err, idem.ErrUnknownOutcome):
		fmt.Printf("RESULT unknown-without-key %v\n", err)
	case errors.Is(err, idem.ErrFailed), errors.Is(err, idem.ErrKeyConflict):
		fmt.Printf("RESULT other %v\n", err)
	default:
		fmt.Printf("RESULT plain %v\n", err)
	}
	sum, err := c.Resume(ctx)
	fmt.Printf("RESUME %+v %v\n", sum, err)
	// Close may fail on a disk that fails every fsync: that is the point.
	_ = c.Close()
	_ = store.Close()
}

// commitStep is one system call of the call's log writes to fail. On the
// calling thread (a lone writer commits on its own goroutine), the first
// write after Open starts a log segment: its header (pwrite64, fdatasync),
// the directory (fsync), the journal file's record that it depends on
// that segment (a bbolt commit: two pages, fdatasync, the meta page,
// fdatasync), then the round (pwrite64, fdatasync). Submit's second
// write, the server's answer, is one more round: pwrite64, fdatasync.
type commitStep struct {
	name    string
	syscall string // "pwrite64" or "fdatasync"
	nth     int    // which call of that kind on the calling thread
	after   bool   // fail every later call of that kind too
	want    string // what the call must report (RESULT's first word)
	submit  bool   // only for Submit
}

var commitSteps = []commitStep{
	// Nothing is in the log yet: the call is refused, nothing journaled.
	{name: "segment header write", syscall: "pwrite64", nth: 1, want: "plain"},
	{name: "segment header fsync", syscall: "fdatasync", nth: 1, want: "plain"},
	// The file's record of the segment fails before bbolt's meta page is
	// written: the file is as it was, and the log goes on (the applier
	// records the segment with its next copy).
	{name: "segment record page write", syscall: "pwrite64", nth: 2, want: "ok"},
	{name: "segment record page fsync", syscall: "fdatasync", nth: 2, want: "ok"},
	// Once its meta page is written, the file may show a commit the disk
	// lacks: the Store stops using it (ErrFileFailed), and the round,
	// not logged yet, is refused: nothing journaled.
	{name: "segment record meta fsync", syscall: "fdatasync", nth: 3, want: "plain"},
	// A failed round is written again on a new segment that voids the
	// first try: a disk that fails once does not fail the call.
	{name: "round write", syscall: "pwrite64", nth: 5, want: "ok"},
	{name: "round fsync", syscall: "fdatasync", nth: 4, want: "ok"},
	// The disk fails everything from the round's write on. A pwrite64
	// that fails writes nothing (write(2) returns the count of what it
	// wrote, if anything): nothing of the round is in the file, the
	// operation is surely not journaled, and the caller hears so.
	{name: "round write and every later one", syscall: "pwrite64", nth: 5, after: true, want: "plain"},
	// After a failed fdatasync the round's bytes may be on disk, and the
	// new segment that would void them cannot be written: nobody can
	// tell whether the operation is journaled.
	{name: "round fsync and every later one", syscall: "fdatasync", nth: 4, after: true, want: "unknown"},
	// Submit's second round records the server's answer (promise 8: the
	// caller sees an outcome only once it is committed).
	{name: "outcome fsync", syscall: "fdatasync", nth: 5, want: "ok", submit: true},
	{name: "outcome fsync and every later one", syscall: "fdatasync", nth: 5, after: true, want: "unknown", submit: true},
	{name: "outcome write and every later one", syscall: "pwrite64", nth: 6, after: true, want: "unknown", submit: true},
}

// TestCommitFailureInjected fails each step of the commit that journals a
// new operation (Submit's and Prepare's) and checks what the caller is
// told against what the journal holds after a reopen and what the server
// received.
func TestCommitFailureInjected(t *testing.T) {
	strace := findStrace(t)
	template := filepath.Join(t.TempDir(), "template.journal")
	s, err := journal.Open(template)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	for _, mode := range []string{"submit", "prepare"} {
		t.Run(mode, func(t *testing.T) {
			// Submit commits twice on the calling thread (the operation,
			// then the server's answer); Prepare once.
			commits := map[string]int{"submit": 2, "prepare": 1}[mode]
			calibrateCommit(t, strace, mode, template, commits)
			for _, step := range commitSteps {
				if step.submit && mode != "submit" {
					continue
				}
				t.Run(strings.ReplaceAll(step.name, " ", "_"), func(t *testing.T) {
					when := fmt.Sprint(step.nth)
					if step.after {
						when += "+"
					}
					inject := fmt.Sprintf("inject=%s:error=EIO:when=%s", step.syscall, when)
					// strace counts, and fails, the nth call of every
					// thread, not the calling one's alone. The journal's
					// applier records the new segment in the file too
					// (25 ms after the round, sooner than a loaded
					// machine's HTTP exchange), on a thread of its own:
					// when=2 failed its bbolt commit's second fdatasync,
					// the meta page's, the file failed (ErrFileFailed)
					// and Submit could not record the server's answer,
					// "unknown", rightly, for a fault the step does not
					// name. Such a run is held to the promises
					// (checkCommitOutcome) and made again, until one
					// fails the calling thread's calls alone before the
					// answer.
					for try := 1; ; try++ {
						logPath := filepath.Join(t.TempDir(), "strace.log")
						run := runCommitChild(t, strace, mode, template, "-o", logPath, "-e", commitTrace, "-e", inject)
						t.Logf("%s: %s", inject, run.resultLine)
						checkCommitOutcome(t, mode, run)
						calls := readCommitTrace(t, logPath)
						require.NotZero(t, calls.ownFaults, "%s: strace failed no call of the calling thread before the answer: the step's call is not where commitStep says", inject)
						if len(calls.otherFaults) == 0 {
							require.Equal(t, step.want, run.result, "%s with EIO at %s: the call reported %q", mode, step.name, run.resultLine)
							break
						}
						require.Less(t, try, commitTries, "%s: every run failed another thread's call before the answer too (last: %s)", inject, strings.Join(calls.otherFaults, "; "))
						t.Logf("run %d also failed another thread's call before the answer, so it does not test the step alone; again: %s", try, strings.Join(calls.otherFaults, "; "))
					}
				})
			}
		})
	}
}

// commitRun is what one child run reported and left behind.
type commitRun struct {
	result     string // RESULT's first word: ok, unknown, plain, …
	resultLine string
	srv        *idemtest.Server
	path       string
}

// checkCommitOutcome holds the call's answer to what the journal holds
// after a reopen and to what the server received.
func checkCommitOutcome(t *testing.T, mode string, run commitRun) {
	t.Helper()
	s, err := journal.Open(run.path)
	require.NoError(t, err)
	defer s.Close()
	rec, gerr := s.Get(context.Background(), idem.DefaultScope, commitFailKey)
	effects := run.srv.Effects("", commitFailKey)
	var posts, others int
	for _, r := range run.srv.Requests() {
		switch {
		case r.Key != commitFailKey:
			others++
		case r.Method == "POST":
			posts++
		}
	}
	require.Zero(t, others, "requests for another key")
	require.LessOrEqual(t, effects, 1, "orders for the one intent")
	switch run.result {
	case "plain":
		// Promise 13: nothing journaled, nothing ever sent.
		require.Zero(t, effects, "%s reported %q, yet the server created the order (a caller retrying under a new key makes two)", mode, run.resultLine)
		require.Empty(t, run.srv.Requests(), "%s reported %q, yet the server received requests for the key", mode, run.resultLine)
		require.ErrorIs(t, gerr, journal.ErrNotFound, "%s reported %q, yet the journal holds the operation after a reopen", mode, run.resultLine)
	case "ok":
		require.NoError(t, gerr, "%s succeeded, but the journal lost the operation", mode)
		if mode == "submit" {
			// Resume's commits run on other threads, where strace may
			// fail another call: only Submit's own outcome is certain.
			require.Equal(t, 1, effects, "orders")
			require.Equal(t, idem.StateSucceeded, rec.State, "Submit reported success; the journal must say so")
		}
	case "unknown":
		// Either fate is allowed; what was sent must be journaled.
		if gerr != nil {
			require.ErrorIs(t, gerr, journal.ErrNotFound)
			require.Zero(t, posts, "the server received the operation, and the journal lost it")
		}
	default:
		t.Fatalf("%s reported %q: want ok, plain, or ErrUnknownOutcome with the key", mode, run.resultLine)
	}
}

// findStrace returns strace's path and checks that this system lets it
// trace a child. Without either it skips, unless requireStraceEnv is set.
func findStrace(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("strace")
	if err == nil {
		var out []byte
		out, err = exec.Command(path, "-f", "-qq", "--seccomp-bpf", "-o", os.DevNull, "-e", "inject=fdatasync:error=EIO", "--", "true").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
	}
	if err != nil {
		if os.Getenv(requireStraceEnv) != "" {
			t.Fatalf("strace is required (%s is set) but cannot run: %v; install it (apt-get install -y strace) and allow ptrace", requireStraceEnv, err)
		}
		t.Skipf("strace unavailable (%v): install it (apt-get install -y strace) to run the fault-injection tests; CI sets %s", err, requireStraceEnv)
	}
	return path
}

// calibrateCommit runs the child once under strace without a fault and
// checks the system calls commitSteps counts on: on the thread that
// printed the mark, the segment header, the directory, the file's record
// of the segment, then one round per commit (see commitStep). It also checks that nothing in the child
// writes before the call.
func calibrateCommit(t *testing.T, strace, mode, template string, commits int) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "strace.log")
	run := runCommitChild(t, strace, mode, template, "-o", logPath, "-e", commitTrace)
	require.Equal(t, "ok", run.result, "calibration run without a fault: %s", run.resultLine)
	calls := readCommitTrace(t, logPath)
	require.Zero(t, calls.before, "pwrite64, fdatasync or fsync calls before the call: the counts would be off")
	want := "WSD" + "WWSWS" + strings.Repeat("WS", commits)
	require.True(t, strings.HasPrefix(calls.seq, want), "the calling thread's system calls for the call's %d commits: %s, want a start of %s (W pwrite64, S fdatasync, D the directory's fsync)", commits, calls.seq, want)
}

// commitTries bounds the runs of one step (see TestCommitFailureInjected):
// a run fails another thread's call before the answer only when the
// applier commits meanwhile, which a third of the runs of the steps that
// fail a second call did on a machine loaded with other tests (none took
// more than two).
const commitTries = 20

// commitTrace is the system calls strace logs in the child: the log
// writes', the bbolt file's, and write, for the mark and the answer.
const commitTrace = "trace=pwrite64,fdatasync,fsync,write"

// commitCalls is what strace's log (commitTrace) says of a child's run.
type commitCalls struct {
	before int    // pwrite64, fdatasync and fsync calls before the mark
	seq    string // the calling thread's, from the mark: W pwrite64, S fdatasync, D fsync
	// ownFaults counts the calls strace failed on the calling thread
	// before the answer; otherFaults lists those it failed on others.
	ownFaults   int
	otherFaults []string
}

// readCommitTrace reads strace's log of a child's run. With -f each line
// starts with the thread's id. A call another thread interrupts is logged
// "<unfinished ...>" and later "<... pwrite64 resumed>", the result (and
// strace's "(INJECTED)") on the second line: each call is counted by its
// start, and a fault is before the answer if its call started before the
// calling thread wrote RESULT.
func readCommitTrace(t *testing.T, path string) commitCalls {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	call := regexp.MustCompile(`^(\d+)\s+(pwrite64|fdatasync|fsync|write)\((.*)`)
	resumed := regexp.MustCompile(`^(\d+)\s+<\.\.\. \w+ resumed>`)
	var c commitCalls
	var markTID string
	answered := false
	startedBefore := map[string]bool{} // a thread's unfinished call began before the answer
	fault := func(tid, line string) {
		if tid == markTID {
			c.ownFaults++
		} else {
			c.otherFaults = append(c.otherFaults, line)
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		injected := strings.HasSuffix(line, "(INJECTED)")
		if m := resumed.FindStringSubmatch(line); m != nil {
			if injected && startedBefore[m[1]] {
				fault(m[1], line)
			}
			continue
		}
		m := call.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		tid := m[1]
		switch {
		case m[2] == "write":
			if markTID == "" && strings.Contains(m[3], commitFailMark) {
				markTID = tid
			} else if tid == markTID && strings.HasPrefix(m[3], `1, "RESULT `) {
				answered = true
			}
		case markTID == "":
			c.before++
		case tid != markTID:
		case m[2] == "pwrite64":
			c.seq += "W"
		case m[2] == "fdatasync":
			c.seq += "S"
		default:
			c.seq += "D"
		}
		if injected && !answered {
			fault(tid, line)
		}
		startedBefore[tid] = !answered && strings.HasSuffix(line, "<unfinished ...>")
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, markTID, "the mark is not in strace's log")
	return c
}

// runCommitChild copies the template journal, starts a fake server, and
// runs the child under strace with args, returning what it reported.
func runCommitChild(t *testing.T, strace, mode, template string, args ...string) commitRun {
	t.Helper()
	srv := newServer(t)
	path := filepath.Join(t.TempDir(), "idem.journal")
	data, err := os.ReadFile(template)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// --seccomp-bpf stops the child only on the traced calls, not on
	// every futex of the Go runtime.
	argv := append([]string{"-f", "-qq", "--seccomp-bpf", "-e", "signal=none"}, args...)
	argv = append(argv, "--", os.Args[0], "-test.run=^TestCommitFailureChild$", "-test.count=1")
	cmd := exec.CommandContext(ctx, strace, argv...)
	cmd.Env = append(os.Environ(), commitFailModeEnv+"="+mode, commitFailPathEnv+"="+path, commitFailURLEnv+"="+srv.URL,
		// Under -race, a child would wait a second at exit for nothing.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "child: stdout:\n%s\nstderr:\n%s", out, stderr.String())
	run := commitRun{srv: srv, path: path}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "ERROR ") {
			t.Fatalf("child: %s", line)
		}
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			run.resultLine = line
			run.result, _, _ = strings.Cut(rest, " ")
		}
	}
	require.NotEmpty(t, run.result, "child reported no RESULT: stdout:\n%s\nstderr:\n%s", out, stderr.String())
	return run
}

// maybeCreateStore commits the record, then reports what a journal says
// when the disk failed the commit's last step and a second commit too:
// the record may or may not be there.
type maybeCreateStore struct {
	idem.Store
}

func (s *maybeCreateStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	if _, err := s.Store.Create(ctx, rec); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("journal: create: %w: input/output error", journal.ErrMaybeCommitted)
}

// A journal that cannot tell whether it took a new operation makes Submit
// and Prepare return ErrUnknownOutcome with the key, never a plain error
// (which would say "nothing journaled": retry under a new key, while the
// reconciler sends the journaled one). Retrying with the key carries out
// the one operation, once.
func TestCreateMaybeCommittedIsUnknownOutcome(t *testing.T) {
	for _, mode := range []string{"submit", "prepare"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			c, err := idem.New(&maybeCreateStore{Store: e.store}, e.baseOpts()...)
			require.NoError(t, err)
			req := e.req("", `{"amount":7}`) // a key idem makes up
			if mode == "submit" {
				var res *idem.Result
				res, err = c.Submit(e.ctx, req)
				require.NotNil(t, res, "Submit's Result on ErrUnknownOutcome")
				require.Equal(t, idem.StatePending, res.State)
			} else {
				_, err = c.Prepare(e.ctx, req)
			}
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.ErrorIs(t, err, journal.ErrMaybeCommitted)
			var ie *idem.Error
			require.ErrorAs(t, err, &ie)
			ops, lerr := e.client.List(e.ctx, idem.Filter{})
			require.NoError(t, lerr)
			require.Len(t, ops, 1)
			key := ops[0].Key
			require.Equal(t, key, ie.Key, "the error names the journaled key")
			require.Equal(t, idem.DefaultScope, ie.Scope)
			require.Contains(t, err.Error(), "never a new one")
			require.Empty(t, e.submits(key), "nothing sent by the failed call")

			req.Key = key
			res, err := e.client.Submit(e.ctx, req)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Len(t, e.submits(key), 1, "submits for the key")
			require.Equal(t, 1, e.srv.Effects(scope, key), "orders")
		})
	}
}
