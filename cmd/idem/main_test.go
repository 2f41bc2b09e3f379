package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
	"github.com/idemkit/idem/journal"
)

// The tests drive the command only through run, as a shell would, and
// check the journal by reopening it with the journal package.

const (
	secretToken = clitest.SecretToken
	orderBody   = clitest.OrderBody
)

var binaryBody = []byte{0x00, 0x01, 0xfe, 0xff, 0x1b, 'x'}

// fixture describes the journal that newJournal writes. Times are relative
// to the real clock, which the command reads.
type fixture struct {
	path string
	now  time.Time
}

// newJournal writes a journal with operations in every interesting state
// (clitest.Records and, between k-succeeded and k-failed, k-binary), closes
// it and returns its path:
//
//	scope    key          state       created  settled  notes
//	default  k-pending    pending     1h ago            one attempt with no outcome
//	default  k-unknown    unknown     3d ago            review "key expired", 2 attempts
//	default  k-succeeded  succeeded   60d ago  40d ago  resource ord_1
//	default  k-binary     succeeded   50d ago  45d ago  binary body
//	default  k-failed     failed      2h ago   1h ago   402
//	acct-2   k-other      processing  10m ago           resource pay_5
func newJournal(t testing.TB) fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payments.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	now := time.Now()
	const day = 24 * time.Hour
	recs := slices.Insert(clitest.Records(now), 3, &journal.Record{
		Scope: "default", Key: "k-binary", Method: "PUT", URL: "https://api.example.com/v1/blobs",
		Body: binaryBody, BodySHA: sha256.Sum256(binaryBody), State: journal.StateSucceeded,
		Created: now.Add(-50 * day), Updated: now.Add(-45 * day), Settled: now.Add(-45 * day),
	})
	ctx := context.Background()
	for _, r := range recs {
		_, err := s.Create(ctx, r)
		require.NoError(t, err, "Create(%s)", r.Key)
	}
	require.NoError(t, s.Close())
	return fixture{path: path, now: now}
}

// TestMain makes the test binary the idem command itself when
// asCommandEnv is set, so that a test can run the command as a process of
// its own and see how that process ends (runIdemProcess).
func TestMain(m *testing.M) {
	if os.Getenv(asCommandEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const asCommandEnv = "IDEM_TEST_AS_COMMAND"

// commandEnv is the environment of the test binary run as the command,
// directly or under strace. A race-enabled binary sleeps a second before
// it exits, unless told not to: hundreds of runs would take minutes (the
// strace tests' children, which did not say so, spent a second each
// after their last system call).
func commandEnv() []string {
	return append(os.Environ(), asCommandEnv+"=1", "IDEM_JOURNAL=",
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// runIdemProcess runs the command as a child process: a crash (a fault the
// runtime cannot turn into a panic, a fatal error) ends it with a status
// and output of the runtime's, where runIdem would take the test binary
// down with it.
func runIdemProcess(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = commandEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode() // -1 if a signal killed it
	default:
		t.Fatalf("idem %q: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// runIdem runs the command in-process.
func runIdem(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// record reopens the journal read-only and returns one record.
func record(t testing.TB, path, scope, key string) (*journal.Record, error) {
	t.Helper()
	s, err := journal.Open(path, journal.ReadOnly())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	return s.Get(context.Background(), scope, key)
}

func fileSum(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout bool
	}{
		{name: "help", args: []string{"-h"}, code: 0, stdout: "Usage: idem [-journal PATH]"},
		{name: "help command", args: []string{"help"}, code: 0, stdout: "Commands:"},
		{name: "help list", args: []string{"help", "list"}, code: 0, stdout: "Usage: idem list"},
		{name: "resolve -h", args: []string{"resolve", "-h"}, code: 0, stdout: "-succeeded"},
		{name: "no command", args: nil, code: 2, stderr: "idem: no command given"},
		{name: "unknown command", args: []string{"lst"}, code: 2, stderr: `unknown command "lst"`},
		{name: "bad global flag", args: []string{"-jornal", "x", "list"}, code: 2, stderr: "flag provided but not defined: -jornal"},
		{name: "bad flag", args: []string{"list", "-x"}, code: 2, stderr: "idem list: flag provided but not defined: -x\nRun 'idem list -h' for usage."},
		{name: "no journal", args: []string{"list"}, code: 2, stderr: "no journal given: pass -journal PATH or set IDEM_JOURNAL"},
		{name: "stray argument", args: []string{"stats", "-journal", "x", "extra"}, code: 2, stderr: `unexpected argument "extra"`},
		{name: "bad state", args: []string{"list", "-journal", "x", "-state", "pending,done"}, code: 2, stderr: `unknown state "done"`},
		{name: "open and state", args: []string{"list", "-journal", "x", "-open", "-state", "pending"}, code: 2, stderr: "-open and -state do not mix"},
		{name: "negative limit", args: []string{"list", "-journal", "x", "-limit", "-1"}, code: 2, stderr: "-limit must not be negative"},
		{name: "bad duration", args: []string{"list", "-journal", "x", "-older-than", "3 days"}, code: 2, stderr: `invalid duration "3 days"`},
		{name: "negative duration", args: []string{"list", "-journal", "x", "-older-than", "-1h"}, code: 2, stderr: "must be positive"},
		{name: "show without key", args: []string{"show", "-journal", "x"}, code: 2, stderr: "no key given"},
		{name: "show two keys", args: []string{"show", "-journal", "x", "a", "b"}, code: 2, stderr: "one key expected"},
		{name: "prune without bound", args: []string{"prune", "-journal", "x"}, code: 2, stderr: "-settled-before is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("IDEM_JOURNAL", "")
			stdout, stderr, code := runIdem(t, tt.args...)
			require.Equal(t, tt.code, code, "exit status; stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stdout, tt.stdout)
			require.Contains(t, stderr, tt.stderr)
			if tt.code == 0 {
				require.Empty(t, stderr)
			} else {
				require.Empty(t, stdout)
			}
		})
	}
}

func TestJournalFromEnvironment(t *testing.T) {
	f := newJournal(t)
	t.Setenv("IDEM_JOURNAL", f.path)
	stdout, stderr, code := runIdem(t, "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "k-unknown")

	// -journal wins over the environment, before or after the command.
	missing := filepath.Join(t.TempDir(), "other.journal")
	for _, args := range [][]string{{"-journal", missing, "list"}, {"list", "-journal", missing}} {
		_, stderr, code = runIdem(t, args...)
		require.Equal(t, 1, code, "idem %q", args)
		require.Contains(t, stderr, missing)
	}
}

func TestReadOnlyCommandsLeaveTheFileAlone(t *testing.T) {
	f := newJournal(t)
	before := fileSum(t, f.path)
	for _, args := range [][]string{
		{"list"}, {"list", "-json"}, {"show", "k-unknown"}, {"stats"},
		{"prune", "-settled-before", "1h", "-dry-run"}, {"show", "nope"},
	} {
		_, _, _ = runIdem(t, append(args, "-journal", f.path)...)
	}
	require.Equal(t, before, fileSum(t, f.path), "journal changed by a read-only command")
}
