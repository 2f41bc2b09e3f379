package idemotel_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/journal"
)

var rounds = flag.Int("rounds", 5, "interleaved rounds of BenchmarkOverhead")

// BenchmarkOverhead measures what the OpenTelemetry layer adds to a
// happy-path Submit, for a lone caller and for 64, with the journal's
// fsync on and off (off, the client's CPU is the whole cost: the harshest
// ratio). Each round runs every contender, starting from a different one
// each round, so a ratio compares runs made seconds apart on a noisy
// machine:
//
//	go test -run='^$' -bench=Overhead -benchtime=1s -rounds=5 ./idemotel
//
// Besides ns/op it reports cpu-µs/op, the process's CPU time per
// operation, steadier than wall time when other work shares the cores.
// The server is a plain in-process handler (idemtest's fake server costs
// more than the client would). Metrics go to an SDK MeterProvider (a
// reader that is never collected: aggregation still runs on every
// record); spans to an SDK TracerProvider sampling everything
// (contender otel) or one trace in ten (contender sampled),
// batched to an exporter that drops them, or (contender metrics) to a
// no-op tracer.
func BenchmarkOverhead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"state":"succeeded","resourceId":"ord_1"}`)
	}))
	defer srv.Close()
	for _, sync := range []bool{false, true} {
		for _, callers := range []int{1, 64} {
			for r := 1; r <= *rounds; r++ {
				// Each round starts from another contender.
				for j := range contenders {
					who := contenders[(j+r)%len(contenders)]
					name := fmt.Sprintf("sync=%t/callers=%d/round=%d/%s", sync, callers, r, who)
					b.Run(name, func(b *testing.B) { benchmarkOverhead(b, srv, callers, sync, who) })
				}
			}
		}
	}
}

// The contenders: no instrumentation; metrics only (a no-op tracer);
// metrics and spans, every operation sampled; metrics and spans with the
// sampler a production service would run, one trace in ten (parent-based:
// a caller's sampled trace is followed, and these callers have none).
var contenders = []string{"plain", "metrics", "otel", "sampled"}

func benchmarkOverhead(b *testing.B, srv *httptest.Server, callers int, sync bool, who string) {
	var jopts []journal.Option
	if !sync {
		jopts = append(jopts, journal.WithUnsafeNoSync())
	}
	store, err := journal.Open(filepath.Join(b.TempDir(), "bench.journal"), jopts...)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	opts := []idem.Option{idem.WithResultEndpoint(srv.URL + "/operations/{key}")}
	flush := func() {}
	if who != "plain" {
		hooks, f, shutdown := contenderHooks(b, who)
		defer shutdown()
		flush = f
		opts = append(opts, idem.WithHooks(hooks))
	}
	c, err := idem.New(store, opts...)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "bench-" + strconv.FormatInt(n.Add(1), 10)
			if _, err := c.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	flush() // the spans still queued are part of the cost
	b.StopTimer()
	// Client and in-process server together: the server's share is the
	// same for both contenders, so the ratio understates the overhead a
	// little.
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// contenderHooks are the hooks of a contender other than plain, what
// flushes the spans it has queued (part of its cost) and what shuts its
// tracer provider down.
func contenderHooks(b *testing.B, who string) (_ idem.Hooks, flush, shutdown func()) {
	b.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	var tp trace.TracerProvider = noop.NewTracerProvider()
	flush, shutdown = func() {}, func() {}
	if who == "otel" || who == "sampled" {
		sampler := sdktrace.AlwaysSample()
		if who == "sampled" {
			sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		flush = func() { _ = sdk.ForceFlush(context.Background()) }
		shutdown = func() { _ = sdk.Shutdown(context.Background()) }
		tp = sdk
	}
	inst, err := idemotel.New(idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	return inst.Hooks(), flush, shutdown
}
