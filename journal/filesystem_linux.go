//go:build linux

package journal

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The file systems' magic numbers, from linux/magic.h and the file
// systems' own sources (statfs(2) lists them).
var fileSystems = map[int64]struct {
	name string
	kind fsKind
}{
	0x6969:     {"NFS", networkFS},
	0x517b:     {"SMB", networkFS},
	0xff534d42: {"CIFS", networkFS},
	0xfe534d42: {"SMB2", networkFS},
	0x01021997: {"9p", networkFS},
	0x5346414f: {"AFS", networkFS},
	0x6b414653: {"kAFS", networkFS},
	0x00c36400: {"Ceph", networkFS},
	0x0bd00bd0: {"Lustre", networkFS},
	0x47504653: {"GPFS", networkFS},
	0x73757245: {"Coda", networkFS},
	0x564c:     {"NCP", networkFS},
	0x65735546: {"FUSE", fuseFS},
}

func statFileSystem(f *os.File) (string, fsKind) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return "", localFS
	}
	fs, ok := fileSystems[int64(st.Type)&0xffffffff]
	if !ok {
		return "", localFS
	}
	return fs.name, fs.kind
}

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h): allocate the
// blocks, leave the file's size as it is.
const fallocKeepSize = 0x1

// reserve allocates n bytes at the start of f without changing its size,
// by fallocate (syscall.Fallocate when nil). It returns nil where the
// space cannot be reserved, which says nothing of the room on the disk:
// a file system without fallocate (EOPNOTSUPP, which is ENOTSUP here; a
// kernel without it, ENOSYS; EINVAL), or a sandbox that denies the call
// (a seccomp filter's EPERM: container runtimes' profiles, gVisor). The
// file was opened for writing by this process just before, so EPERM is
// not the file's own (an immutable or append-only file fails that open).
func reserve(f *os.File, n int64, fallocate fallocateFunc) error {
	if fallocate == nil {
		fallocate = syscall.Fallocate
	}
	for {
		switch err := fallocate(int(f.Fd()), fallocKeepSize, 0, n); err {
		case syscall.EINTR:
			continue
		case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EINVAL, syscall.EPERM:
			return nil
		default:
			return err
		}
	}
}

// sameMount reports whether the file f and the directory dir are on one
// mount, by their mount ids (statx, Linux 5.8 on); true when it cannot
// tell. Devices are no stand-in: overlayfs may give a file the device of
// the layer it lies in, and its directory the overlay's (a container's
// own files, on kernels without xino), and a refusal there would stop a
// service whose journal is where it should be.
func sameMount(f *os.File, dir string) bool {
	var fx, dx unix.Statx_t
	if unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &fx) != nil ||
		unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID, &dx) != nil ||
		fx.Mask&dx.Mask&unix.STATX_MNT_ID == 0 {
		return true
	}
	return fx.Mnt_id == dx.Mnt_id
}
