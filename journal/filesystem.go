package journal

import (
	"errors"
	"os"
)

// ErrNetworkFileSystem means Open was asked to write a journal on a
// network file system (NFS, SMB/CIFS, 9p, AFS, Ceph, Lustre, GPFS, ...).
// There the file lock that keeps a second process out can be a no-op (an
// NFS mount with nolock, SMB without byte-range locks, two replicas with
// one shared volume), so two processes could journal and send the same
// operations: duplicate orders. And whether an fsync makes a write
// durable depends on the server. Put the journal on a local disk (one per
// replica), use pgjournal for a journal that replicas share, or, if you
// know that locking works there and only one process uses the file, open
// it with AllowNetworkFileSystem.
var ErrNetworkFileSystem = errors.New("journal: the file is on a network file system")

// AllowNetworkFileSystem lets Open write a journal on a network file
// system (see ErrNetworkFileSystem). Use it only where its file locks are
// known to work across hosts (NFSv4 with locking on, say) and a single
// process opens the file. A read-only Open never needs it.
func AllowNetworkFileSystem() Option {
	return optionFunc(func(c *config) { c.networkFS = true })
}

// checkFileSystem refuses a journal opened for writing on a network file
// system unless the caller allowed it, and warns of a FUSE one, which may
// be local (fuse-overlayfs) or remote (sshfs, s3fs, gcsfuse): idem cannot
// tell.
func checkFileSystem(f *os.File, path string, cfg *config) error {
	if cfg.readOnly || cfg.networkFS {
		return nil
	}
	name, kind := fileSystemOf(f)
	switch kind {
	case networkFS:
		// Open prefixes "journal: open PATH: " to what its OpenFile hook
		// returns.
		return withKind(ErrNetworkFileSystem, "the file is on %s, a network file system, where its lock may not keep a second process out "+
			"(duplicate sends) and fsync's durability is the server's; put the journal on a local disk, one per replica, "+
			"or use pgjournal for a journal replicas share, or pass journal.AllowNetworkFileSystem() if locking works there and one process uses it", name)
	case fuseFS:
		if cfg.logger != nil {
			cfg.logger.Warn("journal: the file is on a FUSE file system; if that is a network one (sshfs, s3fs, gcsfuse, GlusterFS), "+
				"its lock may not keep a second process out: keep the journal on a local disk", "path", path, "fs", name)
		}
	}
	return nil
}

type fsKind int

const (
	localFS fsKind = iota
	networkFS
	fuseFS
)

// fileSystemOf names the file system f is on and says what kind it is;
// localFS when it cannot tell. A variable, so that tests can stand in a
// network file system the test machine does not have.
var fileSystemOf = statFileSystem
