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

// compactKills are the system calls of `idem compact` at whose nth call the
// process is SIGKILLed, for each n up to max: the copy's pages and size,
// their syncs, the rename over the journal, the directory's sync, and the
// unlinks (a stale copy, the log Close deletes). For a format version 1
// journal the first writes and syncs are the migration's.
var compactKills = []compactFault{
	{"pwrite64", "", 6},
	{"ftruncate", "", 2},
	{"fdatasync", "", 5},
	{"fsync", "", 3},
	{"renameat", "", 2},
	{"unlinkat", "", 3},
}

// A compaction killed at any system call (the operator's kill -9, the
// host's OOM killer) of a journal its application has closed, or of one in
// format version 1 that it migrates first, leaves the journal whole: the
// next process opens it, it checks out and holds every operation as it
// was; and the next compaction succeeds and removes the copy the killed
// one left behind. Modelled: bbolt's commit is atomic only if every step
// of it is, and Compact's rename-over swap is written so that any prefix
// of it leaves the old journal or the new one.
func TestCompactKilled(t *testing.T) {
	strace := findStrace(t)
	for _, tmpl := range []struct{ name, path string }{
		{"current", newJournal(t).path},
		{"version_1", filepath.Join("..", "..", "journal", "testdata", "v1", "journal.db")},
	} {
		orig, err := os.ReadFile(tmpl.path)
		require.NoError(t, err)
		want := reopened(t, copyJournal(t, orig))
		for _, f := range compactKills {
			for n := 1; n <= f.max; n++ {
				name := fmt.Sprintf("%s/%s_call_%d", tmpl.name, f.syscall, n)
				t.Run(name, func(t *testing.T) {
					path := copyJournal(t, orig)
					inject := fmt.Sprintf("inject=%s:signal=SIGKILL:when=%d", f.syscall, n)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, strace, "-f", "-qq", "-o", os.DevNull, "-e", inject, "--", os.Args[0], "compact", "-journal", path)
					cmd.Env = commandEnv()
					out, err := cmd.CombinedOutput()
					t.Logf("%s: %v: %s", inject, err, strings.TrimSpace(string(out)))
					require.Equal(t, want, reopened(t, path), "the journal's operations after a compaction killed by %s", inject)
					_, stderr, code := runIdem(t, "compact", "-journal", path)
					require.Zero(t, code, "the next compaction: %s", stderr)
					left, err := filepath.Glob(path + ".compact*")
					require.NoError(t, err)
					require.Empty(t, left, "copies left behind after the next compaction")
					require.Equal(t, want, reopened(t, path), "the journal's operations after the next compaction")
				})
			}
		}
	}
}

// copyDir copies the regular files of dir (a journal and its log segments)
// into a new directory and returns it.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
	return dst
}

// killedUnder runs `idem args...` SIGKILLed at the nth call of syscall.
func killedUnder(t *testing.T, strace, syscall string, n int, args ...string) string {
	t.Helper()
	inject := fmt.Sprintf("inject=%s:signal=SIGKILL:when=%d", syscall, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, strace, append([]string{"-f", "-qq", "-o", os.DevNull, "-e", inject, "--", os.Args[0]}, args...)...)
	cmd.Env = commandEnv()
	out, err := cmd.CombinedOutput()
	return fmt.Sprintf("%s: %v: %s", inject, err, strings.TrimSpace(string(out)))
}

// A compaction killed at any system call of a journal whose last process
// (here `idem resolve`) was itself killed with its write in the log alone:
// Compact applies the log into the file, copies, swaps and deletes the log;
// whatever it got to, the next process reads every operation as the
// killed writer left it.
func TestCompactKilledAfterAKilledWriter(t *testing.T) {
	strace := findStrace(t)
	for m := 1; m <= 4; m++ {
		t.Run(fmt.Sprintf("writer_fdatasync_%d", m), func(t *testing.T) {
			f := newJournal(t)
			dir := filepath.Dir(f.path)
			t.Log(killedUnder(t, strace, "fdatasync", m, "resolve", "-journal", f.path, "-failed", "-reason", "never sent", "k-pending"))
			base := filepath.Base(f.path)
			want := reopened(t, filepath.Join(copyDir(t, dir), base))
			for _, k := range compactKills {
				for n := 1; n <= k.max; n++ {
					t.Run(fmt.Sprintf("%s_call_%d", k.syscall, n), func(t *testing.T) {
						path := filepath.Join(copyDir(t, dir), base)
						t.Log(killedUnder(t, strace, k.syscall, n, "compact", "-journal", path))
						require.Equal(t, want, reopened(t, path), "the journal's operations after the compaction was killed")
						_, stderr, code := runIdem(t, "compact", "-journal", path)
						require.Zero(t, code, "the next compaction: %s", stderr)
						require.Equal(t, want, reopened(t, path), "the journal's operations after the next compaction")
					})
				}
			}
		})
	}
}

// `idem key-ignoring remove` killed at any system call leaves the journal
// telling the next process what a resend would repeat: either the endpoint
// is still kept, or k-pending (one send there that may have executed, no
// answer) is flagged "key ignored", never resent.
func TestKeyIgnoringRemoveKilled(t *testing.T) {
	strace := findStrace(t)
	const ordersEndpoint = "POST https://api.example.com/v1/orders"
	kills := append([]compactFault{{"write", "", 6}, {"pwrite", "", 4}}, compactKills...)
	for _, k := range kills {
		for n := 1; n <= k.max; n++ {
			t.Run(fmt.Sprintf("%s_call_%d", k.syscall, n), func(t *testing.T) {
				fx := newJournal(t)
				keepEndpoints(t, fx.path, ordersEndpoint)
				t.Log(killedUnder(t, strace, k.syscall, n, "-journal", fx.path, "key-ignoring", "remove", ordersEndpoint))
				s, err := journal.Open(fx.path)
				require.NoError(t, err)
				kept, err := s.KeyIgnoringEndpoints(context.Background())
				require.NoError(t, err)
				rec, err := s.Get(context.Background(), "default", "k-pending")
				require.NoError(t, err)
				require.NoError(t, s.Close())
				t.Logf("kept %q, k-pending's review %q", kept, rec.Review)
				if len(kept) == 0 {
					require.Equal(t, journal.ReviewKeyIgnored, rec.Review, "k-pending once the endpoint is no longer kept")
				}
			})
		}
	}
}
