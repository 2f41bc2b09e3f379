//go:build !linux

package journal

import "os"

// fdatasync flushes f to the disk. Only Linux offers fdatasync to Go's
// syscall package; elsewhere File.Sync is the whole fsync (on macOS,
// F_FULLFSYNC, which reaches the disk's platter rather than its cache).
func fdatasync(f *os.File) error { return f.Sync() }
