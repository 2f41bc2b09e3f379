//go:build unix

package journal

import (
	"os"
	"syscall"
)

// sameOwner gives the open file f the owner and group of the file fi
// describes, when they differ from the ones it has (only root, or a
// member of the group for the group alone, may do that). It works on the
// descriptor, never on a name that could be swapped for a link.
func sameOwner(f *os.File, fi os.FileInfo) error {
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	cur, err := f.Stat()
	if err != nil {
		return err
	}
	if have, ok := cur.Sys().(*syscall.Stat_t); ok && have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	return f.Chown(int(want.Uid), int(want.Gid))
}

// unlinkName removes the name path, never a directory (os.Remove would
// try rmdir too), and never through a symbolic link at path.
func unlinkName(path string) error {
	if err := syscall.Unlink(path); err != nil {
		return &os.PathError{Op: "unlink", Path: path, Err: err}
	}
	return nil
}

// ownCopy reports whether the file fi describes belongs to this process's
// user or to the journal's owner (journal): whoever ran Compact before, or
// the owner it gave its copy.
func ownCopy(fi, journal os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if int(st.Uid) == os.Geteuid() {
		return true
	}
	j, ok := journal.Sys().(*syscall.Stat_t)
	return ok && st.Uid == j.Uid
}

// unlockFile releases the lock bbolt took on f.
func unlockFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
