package journal

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The marker's words go into Open's refusal. Whoever may write the
// journal's directory may write the marker too: a huge one is read no
// further than a marker ever holds, and one that is a link (to a device
// Compact, run as root, would read without end) is not read at all.
func TestMarkerReadIsBounded(t *testing.T) {
	eio := func(string) error { return syscall.EIO }
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, marker string)
		want  string
	}{
		{"huge", func(t *testing.T, marker string) {
			require.NoError(t, os.WriteFile(marker, []byte(strings.Repeat("x", 1<<20)), 0o600))
		}, strings.Repeat("x", 4<<10)},
		{"a link", func(t *testing.T, marker string) {
			target := filepath.Join(t.TempDir(), "secret")
			require.NoError(t, os.WriteFile(target, []byte("words behind the link"), 0o600))
			require.NoError(t, os.Symlink(target, marker))
		}, "?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "j.db")
			require.NoError(t, os.WriteFile(path, []byte("journal"), 0o600))
			tt.plant(t, writeFailedPath(dir, "j.db"))
			err := rewriteAfterFailure(path, nil, eio)
			require.ErrorIs(t, err, syscall.EIO)
			require.Contains(t, err.Error(), `(j.db.write-failed: "`+tt.want+`")`)
			require.Less(t, len(err.Error()), 8<<10, "the refusal carries the whole marker")
		})
	}
}

// The marker lies beside the journal's absolute path. A relative path
// that cannot be made absolute (the working directory removed, as a
// deploy that replaces a release directory does under a running process)
// made writeFailedRead answer nil: a read-only Open and Inspect said
// nothing of a failed write, and an operator relied on what the page
// cache showed. It now answers as for a marker that may be there, and
// says what to do; an Open for writing refuses.
func TestMarkerUnseenWithoutAbsolutePath(t *testing.T) {
	gone := t.TempDir()
	t.Chdir(gone)
	require.NoError(t, os.Remove(gone))
	_, err := filepath.Abs("j.db")
	require.Error(t, err, "the fixture: no absolute path")

	err = writeFailedRead("j.db")
	require.ErrorIs(t, err, ErrFileFailed, "a marker that cannot be looked for")
	require.Contains(t, err.Error(), "j.db.write-failed")
	require.Contains(t, err.Error(), "open the journal by its absolute path", "what to do")

	err = rewriteAfterFailure("j.db", nil, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "open the journal by its absolute path", "what to do")
}

// TestUnmarkedAdviceForTheSystem: when the marker of a failed write
// cannot be left, the error tells the operator how to keep the next Open
// from trusting what memory shows. It named /proc/sys/vm/drop_caches on
// every system, a file Linux alone has: on macOS or Windows the operator
// was sent to a command that cannot run. Elsewhere it names the reboot
// alone.
func TestUnmarkedAdviceForTheSystem(t *testing.T) {
	linux := unmarkedAdvice("linux")
	require.Contains(t, linux, "echo 1 > /proc/sys/vm/drop_caches")
	require.Contains(t, linux, "rebooted")
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		advice := unmarkedAdvice(goos)
		require.NotContains(t, advice, "/proc", goos)
		require.NotContains(t, advice, "drop_caches", goos)
		require.Contains(t, advice, "do not open the journal again before the machine is rebooted", goos)
		require.Contains(t, advice, "after the disk is checked", goos)
	}
}
