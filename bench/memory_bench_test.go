package bench

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// inFlight is how many operations BenchmarkInFlight holds at once.
const inFlight = 1000

// BenchmarkInFlight is target 4's second half: the memory an operation
// costs while it waits for its answer. Each iteration starts 1000
// operations against a server that holds every answer, waits until the
// server holds all of them, and measures the heap (HeapInuse after a GC)
// and the goroutine stacks against the idle state before; then it lets
// them finish. Each in-flight request also holds a connection, whose
// buffers (about 8 KiB in net/http) every client pays alike.
func BenchmarkInFlight(b *testing.B) {
	interleave(b, []contender{idemC, baselineC, bareC, retryC}, func(b *testing.B, c contender) {
		withClient(b, c, func(cl client) {
			ctx := context.Background()
			url := servers.hold + "/v1/orders"
			var heap, stack, goroutines float64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				var before, during runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				b.StartTimer()
				var wg sync.WaitGroup
				for range inFlight {
					wg.Go(func() {
						if err := cl.do(ctx, url); err != nil {
							b.Error(err)
						}
					})
				}
				waitHeld(b, inFlight)
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&during)
				g1 := runtime.NumGoroutine()
				heap += float64(int64(during.HeapInuse) - int64(before.HeapInuse))
				stack += float64(int64(during.StackInuse) - int64(before.StackInuse))
				goroutines += float64(g1 - g0)
				b.StartTimer()
				if _, err := control(ctx, "/_release"); err != nil {
					b.Fatal(err)
				}
				wg.Wait()
			}
			n := float64(b.N) * inFlight
			b.ReportMetric(heap/n, "heap-B/inflight")
			b.ReportMetric(stack/n, "stack-B/inflight")
			b.ReportMetric(goroutines/n, "goroutines/inflight")
		})
	})
}

// waitHeld polls the hold server until it holds n requests.
func waitHeld(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s, err := control(context.Background(), "/_held")
		if err != nil {
			b.Fatal(err)
		}
		if h, _ := strconv.Atoi(s); h >= n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("server holds fewer than %d requests after 30s", n)
}
