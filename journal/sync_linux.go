package journal

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the size, when it grew) to the disk,
// without the metadata a full fsync writes too.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
