package clitest

import "syscall"

// FullDisk is stdout redirected to a file on a full disk, as `> /dev/full`
// is: every write fails with ENOSPC.
type FullDisk struct{}

func (FullDisk) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// ReaderGone is stdout piped to a reader that went away (`idem list |
// head -1`): every write fails with EPIPE. The real command dies of
// SIGPIPE first, as cat does (Go's runtime raises it for a write to fd 1);
// the command sees EPIPE where the runtime does not step in: a stdout
// that is not fd 1, or a program that ignores SIGPIPE.
type ReaderGone struct{}

func (ReaderGone) Write([]byte) (int, error) { return 0, syscall.EPIPE }
