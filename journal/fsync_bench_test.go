package journal

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkFdatasync is what one durable log write costs this machine:
// a write and an fdatasync, appending (the file grows, so the file
// system's metadata is flushed too) or overwriting a block already
// written. cpu-µs/op is the process's CPU, kernel time included.
func BenchmarkFdatasync(b *testing.B) {
	for _, mode := range []string{"append-512B", "overwrite-4KiB"} {
		b.Run(mode, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 4096)
			n := len(buf)
			if mode == "append-512B" {
				n = 512
			}
			var off int64
			c0 := cpuTime()
			for b.Loop() {
				if _, err := f.WriteAt(buf[:n], off); err != nil {
					b.Fatal(err)
				}
				if err := fdatasync(f); err != nil {
					b.Fatal(err)
				}
				if mode == "append-512B" {
					off += int64(n)
				}
			}
			b.ReportMetric(float64((cpuTime()-c0)/time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}
