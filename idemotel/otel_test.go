package idemotel_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	plantedCredential = "Bearer sk_live_PLANTED_CREDENTIAL"
	plantedBody       = "PLANTED_BODY"
)

// telemetry is an in-memory meter and tracer.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	inst   *idemotel.Instrumentation
}

func newTelemetry(t testing.TB, clk idem.Clock) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	inst, err := idemotel.New(idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(tel.tp), idemotel.WithClock(clk))
	require.NoError(t, err)
	tel.inst = inst
	return tel
}

// metrics collects and indexes the data points by instrument name, then
// by their attributes.
func (tel *telemetry) metrics(t testing.TB) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			pts := map[string]float64{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					pts[attrs(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					pts[attrs(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					pts[attrs(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pts[attrs(p.Attributes)] = float64(p.Count)
				}
			}
			out[m.Name] = pts
		}
	}
	return out
}

func attrs(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}

func sum(pts map[string]float64) float64 {
	n := 0.0
	for _, v := range pts {
		n += v
	}
	return n
}

func TestInstrumentsAndSpansOfARunWithFaults(t *testing.T) {
	clk := idemtest.NewClock(epoch)
	tel := newTelemetry(t, clk)
	srv, err := idemtest.NewServer(idemtest.WithClock(clk.Now))
	require.NoError(t, err)
	defer srv.Close()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer store.Close()
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clk),
		idem.WithResultEndpoint(srv.ResultTemplate()), idem.WithMaxAttempts(2),
		idem.WithReconcile(time.Second, time.Minute, 72*time.Hour), idem.WithHooks(tel.inst.Hooks()),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", plantedCredential)
			return nil
		}))
	require.NoError(t, err)
	defer c.Close()
	reg, err := tel.inst.Observe(c)
	require.NoError(t, err)
	defer reg.Unregister()

	ctx, checkout := tel.tp.Tracer("app").Start(context.Background(), "checkout")
	req := func(key string) idem.Request {
		return idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{"note":"` + plantedBody + `"}`)}
	}
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "a"}))
	_, err = c.Submit(ctx, req("a"))
	require.NoError(t, err)
	require.NoError(t, srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "b", Count: 2}))
	_, err = c.Submit(ctx, req("b"))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	checkout.End()

	clk.Advance(time.Minute)
	b, err := store.Get(context.Background(), idem.DefaultScope, "b")
	require.NoError(t, err)
	m := tel.metrics(t)
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricOpen])
	require.Equal(t, map[string]float64{"": 1}, m[idemotel.MetricUnknown])
	require.Equal(t, map[string]float64{"": 0}, m[idemotel.MetricFlagged])
	require.Equal(t, map[string]float64{"": clk.Now().Sub(b.Created).Seconds()}, m[idemotel.MetricOldestUnknownAge])
	require.Less(t, m[idemotel.MetricRetryTokens][""], idem.DefaultRetryTokens, "failed attempts cost tokens")

	// The reconciler settles b in a visit that links back to checkout.
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(rctx) }()
	require.Eventually(t, func() bool {
		op, err := c.Lookup(context.Background(), "", "b")
		return err == nil && op.State == idem.StateSucceeded
	}, 15*time.Second, time.Millisecond)
	cancel()
	<-done

	submits, queries := 0, 0
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet {
			queries++
		} else {
			submits++
		}
	}
	m = tel.metrics(t)
	attempts := m[idemotel.MetricAttempts]
	require.Equal(t, float64(submits+queries), sum(attempts), "attempts counted vs the server's log: %v", attempts)
	require.Equal(t, float64(queries), attempts["idem.attempt.kind=query,idem.attempt.status_class=2xx"]+
		attempts["idem.attempt.kind=query,idem.attempt.status_class=4xx"], "queries: %v", attempts)
	require.Equal(t, float64(2), attempts["idem.attempt.kind=submit,idem.attempt.status_class=5xx"], "the two 503s: %v", attempts)
	require.Equal(t, float64(submits+queries), sum(m[idemotel.MetricAttemptDuration]))
	require.Equal(t, map[string]float64{"idem.outcome=succeeded": 2, "idem.outcome=handed_off": 1}, m[idemotel.MetricOperationOutcomes])
	require.Equal(t, map[string]float64{"": 0}, m[idemotel.MetricOpen])

	var calls, visits, tries []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		switch {
		case s.Name() == "idem call":
			calls = append(calls, s)
		case s.Name() == "idem reconcile":
			visits = append(visits, s)
		case s.SpanKind() == trace.SpanKindClient:
			tries = append(tries, s)
		}
		for _, kv := range s.Attributes() {
			for _, p := range []string{"PLANTED", "sk_live"} {
				require.NotContains(t, kv.Value.Emit(), p, "span %s attribute %s", s.Name(), kv.Key)
			}
		}
	}
	require.Len(t, calls, 2)
	for _, s := range calls {
		require.Equal(t, checkout.SpanContext().SpanID(), s.Parent().SpanID(), "a call is a child of the caller's span")
	}
	require.Len(t, tries, submits+queries, "one span per attempt")
	parents := map[trace.SpanID]bool{}
	for _, s := range append(calls, visits...) {
		parents[s.SpanContext().SpanID()] = true
	}
	for _, s := range tries {
		require.True(t, parents[s.Parent().SpanID()], "attempt span %s has no operation span as parent", s.Name())
		require.Contains(t, []string{"POST", "GET"}, s.Name())
	}
	require.NotEmpty(t, visits)
	last := visits[len(visits)-1]
	require.Len(t, last.Links(), 1, "the visit links to the trace that journaled it")
	require.Equal(t, checkout.SpanContext().TraceID(), last.Links()[0].SpanContext.TraceID())
	require.Equal(t, checkout.SpanContext().SpanID(), last.Links()[0].SpanContext.SpanID())
	require.NotEqual(t, checkout.SpanContext().TraceID(), last.SpanContext().TraceID(), "Run's visit is its own trace")

	rec, err := store.Get(context.Background(), idem.DefaultScope, "b")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rec.Trace, "00-"+checkout.SpanContext().TraceID().String()), "journaled %q", rec.Trace)
}

// fakeAPI is a test's fake order API, journal and telemetry, on one
// injected clock.
type fakeAPI struct {
	clk   *idemtest.Clock
	tel   *telemetry
	srv   *idemtest.Server
	store *journal.Store
}

func newFakeAPI(t testing.TB) *fakeAPI {
	t.Helper()
	f := &fakeAPI{clk: idemtest.NewClock(epoch)}
	f.tel = newTelemetry(t, f.clk)
	var err error
	f.srv, err = idemtest.NewServer(idemtest.WithClock(f.clk.Now))
	require.NoError(t, err)
	t.Cleanup(f.srv.Close)
	f.store, err = journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.store.Close()) })
	return f
}

// client is a Client on the journal with default settings but for the
// fake's result endpoint, clock and the telemetry's hooks.
func (f *fakeAPI) client(t testing.TB) *idem.Client {
	t.Helper()
	c, err := idem.New(f.store, idem.WithHTTPClient(f.srv.Client()), idem.WithClock(f.clk),
		idem.WithResultEndpoint(f.srv.ResultTemplate()), idem.WithHooks(f.tel.inst.Hooks()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}
