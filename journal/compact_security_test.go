package journal_test

// Compact replaces the journal file: it must replace the right file, keep
// its owner and mode, and never be turned into a way to write elsewhere.

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestCompactThroughSymlink: Compact renamed its copy over the
// path it was given. When that path is a symbolic link to the journal,
// the link was replaced by a regular file and the journal it pointed to
// was left as it was: from then on the application (opening the real
// path) and the operator tool (opening the link) work on two different
// journals, and what one resolves or prunes the other never sees.
func TestCompactThroughSymlink(t *testing.T) {
	real := settledJournal(t, 200)
	link := filepath.Join(t.TempDir(), "journal-link")
	require.NoError(t, os.Symlink(real, link))

	_, err := journal.Compact(link)
	require.NoError(t, err)

	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.True(t, fi.Mode()&os.ModeSymlink != 0, "Compact replaced the symlink with a regular file (mode %v)", fi.Mode())
	require.NoError(t, journal.Check(real))
	require.Empty(t, compactCopies(t, real), "copies left behind")

	// One journal: a write through the link is seen at the real path.
	ctx := context.Background()
	s, err := journal.Open(link)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "after-compact", time.Now()))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = journal.Open(real, journal.ReadOnly())
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "acct", "after-compact")
	require.NoError(t, err)
}

// compactCopies returns the names in path's directory that Compact's
// copies of the journal at path have, or had.
func compactCopies(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), filepath.Base(path)+".compact") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCompactKeepsMode: issue 10, item 6. The copy Compact renamed over
// the journal was created 0600, so a journal made 0640 (readable by a
// monitoring group) lost its group's access on every compact.
func TestCompactKeepsMode(t *testing.T) {
	for _, mode := range []os.FileMode{0o640, 0o600, 0o660} {
		path := settledJournal(t, 50)
		require.NoError(t, os.Chmod(path, mode))
		_, err := journal.Compact(path)
		require.NoError(t, err)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode().Perm(), "mode after Compact")
	}
}

// TestCompactNeverFollowsPlantedLink: issue 10, item 6. Compact removed
// its temporary file by a fixed name (journal.compact), created it again
// with O_CREATE, without O_EXCL or O_NOFOLLOW, and changed its owner by
// name: someone allowed to write the journal's directory could put a
// symbolic link there between the two, and Compact, run as root, created
// the file the link names (anywhere: /etc/cron.d/…), and handed it to the
// journal's owner. Here a goroutine plants the link again and again while
// Compact runs, many times: nothing is ever created or written through it.
// The copy now has a random name, is created exclusively, and is never
// opened again by name.
func TestCompactNeverFollowsPlantedLink(t *testing.T) {
	path := settledJournal(t, 50)
	victimDir := t.TempDir()
	victim := filepath.Join(victimDir, "created-by-compact")
	planted := path + ".compact"

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Symlink(victim, planted) // fails while the name is taken
			runtime.Gosched()
		}
	}()
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
	}
	defer halt()
	for i := 0; i < 100; i++ {
		_, err := journal.Compact(path)
		require.NoError(t, err, "Compact %d", i)
		_, err = os.Lstat(victim)
		require.ErrorIs(t, err, os.ErrNotExist, "Compact %d created a file through a planted link", i)
	}
	halt()
	require.NoError(t, journal.Check(path))
	fi, err := os.Lstat(planted)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "the planted link was replaced")
}

// TestCompactRemovesStaleCopiesSafely: issue 10, item 6. A copy a killed
// Compact left behind (under today's names or the old fixed one) is
// removed by the next Compact; what is not a regular file (a link, a
// directory) is left alone and never followed, and so is a file owned by
// someone else.
func TestCompactRemovesStaleCopiesSafely(t *testing.T) {
	path := settledJournal(t, 50)
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep me"), 0o600))

	stale := []string{path + ".compact", path + ".compact-1234567"}
	for _, name := range stale {
		require.NoError(t, os.WriteFile(name, []byte("half a copy"), 0o600))
	}
	link := path + ".compact-2345678"
	require.NoError(t, os.Symlink(victim, link))
	dir := path + ".compact-3456789"
	require.NoError(t, os.Mkdir(dir, 0o700))
	keep := []string{link, dir}
	if os.Geteuid() == 0 {
		other := path + ".compact-4567890"
		require.NoError(t, os.WriteFile(other, []byte("someone else's"), 0o600))
		require.NoError(t, os.Chown(other, 4242, 4242))
		keep = append(keep, other)
	}

	_, err := journal.Compact(path)
	require.NoError(t, err)

	for _, name := range stale {
		_, err := os.Lstat(name)
		require.ErrorIs(t, err, os.ErrNotExist, "stale copy %s left behind", filepath.Base(name))
	}
	for _, name := range keep {
		_, err := os.Lstat(name)
		require.NoError(t, err, "%s removed", filepath.Base(name))
	}
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(got), "written through a link")
	require.NoError(t, journal.Check(path))
}
