//go:build unix

package journal

import (
	"os"
	"syscall"
)

// sameOwner gives the file at path the owner and group of the file fi
// describes, when they differ from the ones it has (only root, or a
// member of the group for the group alone, may do that).
func sameOwner(path string, fi os.FileInfo) error {
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	cur, err := os.Stat(path)
	if err != nil {
		return err
	}
	if have, ok := cur.Sys().(*syscall.Stat_t); ok && have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	return os.Chown(path, int(want.Uid), int(want.Gid))
}
