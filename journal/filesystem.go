package journal

import (
	"errors"
	"fmt"
	"os"
	"syscall"
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

// newFileSize is what bbolt writes into an empty file to make it a
// database: two meta pages, a freelist page and an empty leaf, of the
// system's page size (bbolt's DB.init; the journal sets no PageSize).
var newFileSize = 4 * int64(os.Getpagesize())

// reserveNew makes sure that bbolt can write a new journal's first pages
// into the empty file f, before it tries. On a nearly full disk
// (or past a quota) its one write of them stopped part way: bbolt.Open
// failed with ENOSPC and left a file of one to three pages, and every
// later start, with the disk freed, refused it as truncated and asked for
// a complete copy to restore, of a journal that never held anything. The
// space is reserved without changing the file's size, so that a refusal
// leaves it empty, and the next Open makes a journal of it. Where the
// space cannot be reserved (reserve says which errors mean that), bbolt
// writes as before. fallocate stands in for fallocate(2) when a test sets
// it. Only a full disk or quota is told to free space: advice to free
// space for another failure (EIO) sends the operator after space that is
// there.
func reserveNew(f *os.File, fallocate fallocateFunc) error {
	err := reserve(f, newFileSize, fallocate)
	if err == nil {
		return nil
	}
	// Open prefixes "journal: open PATH: ".
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("no room for a new journal (%w): nothing was written; free space on its file system and start again", err)
	}
	return fmt.Errorf("reserving a new journal's first pages: %w: nothing was written", err)
}

// fallocateFunc has syscall.Fallocate's shape: fd, mode, offset, length.
type fallocateFunc func(fd int, mode uint32, off, n int64) error

// ErrFileMountedAlone means Open was asked to write a journal file that
// is mounted by itself (a container given the file alone: a Kubernetes
// subPath, Docker's -v FILE:FILE), on another mount than its directory,
// where the journal writes its log: a write is durable once it is in the
// log, and a new container does not get the directory the old one wrote
// it in. The file itself is whole; mount its directory instead.
var ErrFileMountedAlone = errors.New("journal: the file is mounted by itself, apart from its directory")

// checkMount refuses to write a journal file at path that is a mount of
// its own, on another mount than its directory, where the log is written
// (the directory of the file a symbolic link names, logLocation). A
// container given the file alone (Kubernetes' subPath, Docker's -v
// FILE:FILE) has it on its volume, and the log in the container's own
// layer, which the next container does not get: a write is acknowledged
// once it is in the log, and reaches the file up to a second later, so a
// process killed meanwhile lost it, and the next Open, finding no log,
// could not tell.
func checkMount(f *os.File, path string) error {
	dir, _ := logLocation(path)
	if sameMount(f, dir) {
		return nil
	}
	// Open prefixes "journal: open PATH: ".
	return withKind(ErrFileMountedAlone, "the file is mounted by itself (a container given the file alone: a Kubernetes subPath, Docker's -v FILE:FILE), "+
		"but the journal writes its log beside it, in %s, on another mount, and a write is durable once it is in the log: "+
		"whatever the log holds is lost with that directory (a new container has its own). Nothing was written; mount the journal's directory instead of the file", dir)
}
