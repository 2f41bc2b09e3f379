package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkApply measures the applier alone: b.N records, created and
// settled through the log with the applier held off, then copied into the
// file in applyBatch-sized transactions. Per record: CPU and allocations
// of the copy, which every operation pays once, off its caller's path.
func BenchmarkApply(b *testing.B) {
	for _, sync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			var opts []Option
			if !sync {
				opts = append(opts, WithUnsafeNoSync())
			}
			s, err := Open(filepath.Join(b.TempDir(), "j.db"), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.ap.delay = time.Hour
			ctx := context.Background()
			const chunk = 2000
			b.ReportAllocs()
			var cpu time.Duration
			for i := 0; i < b.N; i += chunk {
				b.StopTimer()
				for j := i; j < min(i+chunk, b.N); j++ {
					key := fmt.Sprintf("key-%09d", j)
					if _, err := s.Create(ctx, benchRecord(key, benchBody, benchSHA)); err != nil {
						b.Fatal(err)
					}
					if _, err := s.Update(ctx, "acct_bench", key, settleRecord); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				c0 := cpuTime()
				if err := s.applyAll(); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/record")
		})
	}
}
