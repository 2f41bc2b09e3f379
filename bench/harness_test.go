package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// interleave runs every contender once per round, as sub-benchmarks named
// round=R/NAME, rotating the starting contender each round.
func interleave(b *testing.B, contenders []contender, run func(b *testing.B, c contender)) {
	for r := range *rounds {
		for i := range contenders {
			c := contenders[(r+i)%len(contenders)]
			b.Run(fmt.Sprintf("round=%d/%s", r+1, c.name), func(b *testing.B) { run(b, c) })
		}
	}
}

// gcSample is the garbage collector's CPU time and cycle count so far.
type gcSample struct {
	cpuSeconds float64
	cycles     uint64
}

// gcStats reads the runtime's estimates. The GC's CPU is assists,
// dedicated mark workers and pauses: not the idle-priority marking, which
// runs only on otherwise idle processors and would count idle time.
func gcStats() gcSample {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"},
		{Name: "/cpu/classes/gc/pause:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(s)
	return gcSample{cpuSeconds: s[0].Value.Float64() + s[1].Value.Float64() + s[2].Value.Float64(), cycles: s[3].Value.Uint64()}
}

func (g gcSample) since(old gcSample) gcSample {
	return gcSample{g.cpuSeconds - old.cpuSeconds, g.cycles - old.cycles}
}

// machineTicks is the machine's CPU time so far, in clock ticks: all of it
// and the idle part (idle and iowait), from /proc/stat; ok is false where
// there is none.
func machineTicks() (total, idle uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i < 8 { // user … steal; guest time is already in user
			total += n
		}
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return total, idle, true
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A drainer finishes, inside the measured window, the work its operations
// left to the background (idem's journal copies its log into the bbolt
// file behind the callers): the figures then count all of it.
type drainer interface{ drain() error }

// runOps runs b.N operations of cl against url from callers goroutines
// and reports ops/s, latency percentiles, and the CPU time per operation
// of this process (the client) and of the server process.
func runOps(b *testing.B, cl client, url string, callers int) {
	b.Helper()
	ctx := context.Background()
	// One operation per caller first: connections dialed, files created.
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if err := cl.do(ctx, url); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	lat := make([][]time.Duration, callers)
	per := b.N/callers + 1
	for i := range lat {
		lat[i] = make([]time.Duration, 0, per)
	}
	var next atomic.Int64
	var failed atomic.Bool
	b.ReportAllocs()
	b.ResetTimer()
	tot0, idle0, ticksOK := machineTicks()
	cpu0, srv0, gc0, start := cpuTime(), serverCPU(), gcStats(), time.Now()
	for w := range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && !failed.Load() {
				t := time.Now()
				if err := cl.do(ctx, url); err != nil {
					b.Error(err)
					failed.Store(true)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	if d, ok := cl.(drainer); ok {
		if err := d.drain(); err != nil {
			b.Error(err)
		}
	}
	elapsed, cpu, srv, gc := time.Since(start), cpuTime()-cpu0, serverCPU()-srv0, gcStats().since(gc0)
	tot1, idle1, ticksOK1 := machineTicks()
	b.StopTimer()
	if ticksOK && ticksOK1 && tot1 > tot0 {
		// How busy the machine's CPUs were: near 100 the contender is
		// CPU-bound; well below, it waits (for fsync, for its turn in a
		// commit round) with CPU to spare.
		b.ReportMetric(100*float64((tot1-tot0)-(idle1-idle0))/float64(tot1-tot0), "busy-%")
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/op")
	b.ReportMetric(float64(srv.Microseconds())/n, "srv-cpu-µs/op")
	// GC pressure, visible: the collector's CPU (the runtime's estimate,
	// see gcStats) and collections per 1,000 operations.
	b.ReportMetric(gc.cpuSeconds*1e6/n, "gc-cpu-µs/op")
	b.ReportMetric(float64(gc.cycles)*1000/n, "gcs/1k-ops")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}

// withClient opens c in a fresh directory, runs fn, and closes it.
func withClient(b *testing.B, c contender, fn func(client)) {
	b.Helper()
	cl, err := c.open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.close()
	fn(cl)
}
