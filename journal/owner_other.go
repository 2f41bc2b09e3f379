//go:build !unix

package journal

import "os"

// sameOwner does nothing where files have no Unix owner.
func sameOwner(*os.File, os.FileInfo) error { return nil }

// unlinkName removes the file at path.
func unlinkName(path string) error { return os.Remove(path) }

// ownCopy reports true: there is no owner to compare.
func ownCopy(os.FileInfo, os.FileInfo) bool { return true }

// unlockFile does nothing: closing the file releases its lock.
func unlockFile(*os.File) {}
