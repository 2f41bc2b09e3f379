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

// TestJournalDirectoryMountedIsOpened: the refusal of a file mounted by
// itself (checkMount) must not stop a service whose journal's directory
// is where its log is kept, whatever the layout: a volume mounted at the
// directory (a PersistentVolumeClaim at /data), a directory bind-mounted
// (Docker's -v DIR:DIR, a Kubernetes subPath naming a directory), the
// path a symbolic link to a file on a volume (the log goes beside the
// file the link names), a relative path through "..", and a journal in
// an image's layer, used through the container's overlayfs. A write
// acknowledged before a kill is there on the next Open.
func TestJournalDirectoryMountedIsOpened(t *testing.T) {
	volume := func(t *testing.T) string {
		dir := t.TempDir()
		mountOrSkip(t, "tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700")
		return dir
	}
	for _, tc := range []struct {
		name   string
		layout func(t *testing.T) string // the path Open is given
	}{
		{"volume at the directory", func(t *testing.T) string {
			return filepath.Join(volume(t), "j.db")
		}},
		{"directory bind-mounted", func(t *testing.T) string {
			dir := t.TempDir()
			mountOrSkip(t, volume(t), dir, "", syscall.MS_BIND, "")
			return filepath.Join(dir, "j.db")
		}},
		{"symbolic link to a file on a volume", func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "j.db")
			require.NoError(t, os.Symlink(filepath.Join(volume(t), "j.db"), path))
			return path
		}},
		{"relative path through ..", func(t *testing.T) string {
			sub := filepath.Join(volume(t), "sub")
			require.NoError(t, os.Mkdir(sub, 0o700))
			t.Chdir(sub)
			return filepath.Join("..", "j.db")
		}},
		{"image layer through overlayfs", func(t *testing.T) string {
			base := volume(t)
			for _, d := range []string{"lower", "upper", "work", "merged"} {
				require.NoError(t, os.Mkdir(filepath.Join(base, d), 0o700))
			}
			s, err := Open(filepath.Join(base, "lower", "j.db"))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			merged := filepath.Join(base, "merged")
			mountOrSkip(t, "overlay", merged, "overlay", 0, "lowerdir="+filepath.Join(base, "lower")+
				",upperdir="+filepath.Join(base, "upper")+",workdir="+filepath.Join(base, "work"))
			return filepath.Join(merged, "j.db")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := tc.layout(t)
			s, err := Open(path, withApplyDelay(time.Hour))
			require.NoError(t, err)
			_, err = s.Create(ctx, newRecord("k"))
			require.NoError(t, err)
			s.crash(t) // the write in the log alone
			s, err = Open(path)
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Get(ctx, "s", "k")
			require.NoError(t, err)
		})
	}
}

// mountOrSkip mounts src at dst for the test, or skips it where mounting
// is refused (not root, no CAP_SYS_ADMIN): mount(2)'s arguments.
func mountOrSkip(t *testing.T, src, dst, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount(src, dst, fstype, flags, data); err != nil {
		t.Skipf("mount refused (%v)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dst, syscall.MNT_DETACH) })
}
