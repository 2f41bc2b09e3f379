//go:build linux

package journal

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJournalFileMountedAloneIsRefused: a journal file mounted into a
// container by itself (Kubernetes' volumeMounts subPath: j.db, Docker's
// -v /srv/j.db:/app/data/j.db) is on the volume, but its log is written
// beside it, in the container's own directory: the container's writable
// layer, which a new container (a restart after an OOM kill, a redeploy)
// does not have. A write is acknowledged once it is in the log, and
// reaches the file up to a second later: a process killed meanwhile left
// it in a layer that was thrown away, and the next Open, finding no log,
// had nothing to say of it. An operation journaled, and perhaps sent, was
// lost without a word. Open now refuses a file on another mount than its
// directory, and says to mount the directory.
func TestJournalFileMountedAloneIsRefused(t *testing.T) {
	ctx := context.Background()
	volume := t.TempDir()
	mountOrSkip(t, "tmpfs", volume, "tmpfs", 0, "size=4m,mode=0700")
	onVolume := filepath.Join(volume, "j.db")
	require.NoError(t, os.WriteFile(onVolume, nil, 0o600))

	// container mounts the volume's file alone into a directory of its
	// own, as a container runtime does, and returns its path there.
	container := func() string {
		path := filepath.Join(t.TempDir(), "j.db")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		require.NoError(t, syscall.Mount(onVolume, path, "", syscall.MS_BIND, ""))
		t.Cleanup(func() { _ = syscall.Unmount(path, syscall.MNT_DETACH) })
		return path
	}

	path := container()
	s, err := Open(path, withApplyDelay(time.Hour))
	if err != nil {
		require.ErrorContains(t, err, "mount the journal's directory")
		// The journal is whole: a refusal read as damage sends an
		// operator to restore a copy, and an application that moves a
		// damaged journal aside to start again would do so.
		require.ErrorIs(t, err, ErrFileMountedAlone)
		require.NotErrorIs(t, err, ErrCorrupt)
		require.NotContains(t, err.Error(), "damaged")
		matches, gerr := filepath.Glob(path + logInfix + "*")
		require.NoError(t, gerr)
		require.Empty(t, matches, "no log started in the container's directory")
		return
	}
	_, err = s.Create(ctx, newRecord("k"))
	require.NoError(t, err, "acknowledged: in the log")
	s.crash(t) // killed before the applier copied it into the file

	s, err = Open(container(), withApplyDelay(time.Hour))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Get(ctx, "s", "k")
	require.NoError(t, err, "the acknowledged write, after a new container")
}
