package clitest

import (
	"bytes"
	"io"
	"syscall"
	"testing"
)

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

// RequireUnprintedExits checks how a command (run, as cmd/idem's) whose
// output is all it did ends when stdout fails: exit status 1 with the
// write error on stderr on a full disk, exit status 1 and nothing said to
// a reader gone.
func RequireUnprintedExits(t testing.TB, run func(args []string, stdout, stderr io.Writer) int, args []string) {
	t.Helper()
	var stderr bytes.Buffer
	want := "idem: printing the output failed: " + syscall.ENOSPC.Error() + "\n"
	if code := run(args, FullDisk{}, &stderr); code != 1 || stderr.String() != want {
		t.Errorf("%q to a full disk: exit status %d, stderr %q; want 1, %q", args, code, stderr.String(), want)
	}
	stderr.Reset()
	if code := run(args, ReaderGone{}, &stderr); code != 1 || stderr.Len() != 0 {
		t.Errorf("%q to a reader gone: exit status %d, stderr %q; want 1, nothing", args, code, stderr.String())
	}
}
