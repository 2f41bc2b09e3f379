package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// requireStraceEnv makes a missing strace, or a ptrace the system refuses,
// a failure rather than a skip. CI sets it.
const requireStraceEnv = "IDEM_REQUIRE_STRACE"

// compactFault is a system call failed from its nth call on, for each n
// up to max: a disk that fills up or fails partway through.
type compactFault struct {
	syscall, errno string
	max            int
}

// compactFaults are the system calls of `idem compact`'s copy and swap: the
// copy's pages, their syncs, its size, the rename over the journal and the
// directory's sync (one more n than there are calls: the last run
// compacts). migrateFaults are those of the migration of a format version
// 1 journal, which comes first: its pages and their syncs.
var (
	compactFaults = []compactFault{
		{"pwrite64", "ENOSPC", 5},
		{"ftruncate", "ENOSPC", 2},
		{"fdatasync", "EIO", 3},
		{"fsync", "EIO", 3},
		{"renameat", "EIO", 2},
	}
	migrateFaults = []compactFault{
		{"pwrite64", "ENOSPC", 3},
		{"fdatasync", "EIO", 4},
	}
)

// A compaction that the disk fails at any step leaves the journal whole:
// as the next process to open it finds it, it checks out and holds every
// operation it held, open ones included, as they were, whether the
// command reported success or not; and no copy is left behind to hold the
// space. Also for a journal in format version 1, which Compact migrates
// (in one transaction of the journal itself) before it copies.
func TestCompactOnFailingDisk(t *testing.T) {
	strace := findStrace(t)
	for _, tmpl := range []struct {
		name, path string
		faults     []compactFault
	}{
		{"current", newJournal(t).path, compactFaults},
		{"version_1", filepath.Join("..", "..", "journal", "testdata", "v1", "journal.db"), migrateFaults},
	} {
		orig, err := os.ReadFile(tmpl.path)
		require.NoError(t, err)
		want := reopened(t, copyJournal(t, orig))
		for _, f := range tmpl.faults {
			for n := 1; n <= f.max; n++ {
				name := fmt.Sprintf("%s/%s_%s_from_call_%d", tmpl.name, f.syscall, f.errno, n)
				t.Run(name, func(t *testing.T) {
					path := copyJournal(t, orig)
					inject := fmt.Sprintf("inject=%s:error=%s:when=%d+", f.syscall, f.errno, n)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, strace, "-f", "-qq", "-o", os.DevNull, "-e", inject, "--", os.Args[0], "compact", "-journal", path)
					cmd.Env = commandEnv()
					out, err := cmd.CombinedOutput()
					t.Logf("%s: %v: %s", inject, err, strings.TrimSpace(string(out)))
					// On a full disk, a copy left behind would hold the space.
					left, err := filepath.Glob(path + ".compact*")
					require.NoError(t, err)
					require.Empty(t, left, "copies left behind")
					require.Equal(t, want, reopened(t, path), "the journal's operations after a compaction failed by %s", inject)
				})
			}
		}
	}
}

// copyJournal writes a journal file with the bytes b into a new directory
// and returns its path.
func copyJournal(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payments.journal")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// reopened opens the journal at path as the next process would (which
// migrates an older format), checks it, and lists its operations, each
// with what a compaction must keep of it.
func reopened(t *testing.T, path string) []string {
	t.Helper()
	s, err := journal.Open(path)
	require.NoError(t, err)
	recs, err := s.List(context.Background(), journal.Filter{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, journal.Check(path))
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s/%s %s review=%q attempts=%d body=%x due=%s settled=%s",
			r.Scope, r.Key, r.State, r.Review, len(r.Attempts), r.BodySHA[:8], r.NextDue.Format(time.RFC3339Nano), r.Settled.Format(time.RFC3339Nano))
	}
	return out
}

// findStrace returns strace's path, once it has checked that strace can
// inject a fault here; it skips the test otherwise, unless
// requireStraceEnv is set.
func findStrace(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("strace")
	if err == nil {
		var out []byte
		out, err = exec.Command(path, "-f", "-qq", "-o", os.DevNull, "-e", "inject=fdatasync:error=EIO", "--", "true").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
	}
	if err != nil {
		if os.Getenv(requireStraceEnv) != "" {
			t.Fatalf("strace is required (%s is set) but cannot run: %v", requireStraceEnv, err)
		}
		t.Skipf("strace unavailable (%v); CI sets %s", err, requireStraceEnv)
	}
	return path
}
