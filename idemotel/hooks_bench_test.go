package idemotel_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// BenchmarkHooks measures the layer alone: the hooks of one happy-path
// Submit (Call, one Attempt, Settle, the call's end) with no client, no
// journal and no server around them, so that its cost per operation can
// be set against the client's without the noise of a whole run:
//
//	go test -run='^$' -bench=Hooks -benchtime=2s ./idemotel
//
// The contenders are BenchmarkOverhead's (plain has no hooks to run).
func BenchmarkHooks(b *testing.B) {
	for _, who := range contenders[1:] {
		b.Run(who, func(b *testing.B) {
			h, flush, shutdown := contenderHooks(b, who)
			defer shutdown()
			var n atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := "bench-" + strconv.FormatInt(n.Add(1), 10)
					ctx, end := h.Call(context.Background(), idem.CallEvent{
						Scope: idem.DefaultScope, Key: key, Method: http.MethodPost, Kind: "call",
						URL: "http://127.0.0.1:8080/orders", ResultURL: "http://127.0.0.1:8080/operations/" + key,
						State: idem.StatePending,
					})
					start := time.Now()
					h.Attempt(ctx, idem.AttemptEvent{Scope: idem.DefaultScope, Key: key, Number: 1, Wrote: true,
						StatusCode: http.StatusCreated, Start: start, Duration: time.Since(start)})
					res := &idem.Result{Key: key, State: idem.StateSucceeded}
					h.Settle(ctx, res)
					end(res, nil)
				}
			})
			flush()
			b.StopTimer()
			// On every core: ns/op is wall time with all of them busy.
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
