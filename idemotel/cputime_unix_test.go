//go:build unix

package idemotel_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used: on a
// machine other work shares, a steadier measure of cost than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
