package idemotel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemotel"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// outcomeServer answers 201 to every order but those whose key starts
// with "reject", which get a 422.
func outcomeServer(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "reject") {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"state":"failed"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"state":"succeeded","resourceId":"ord_1"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// submitAll submits one order per key through a client with hooks, in turn.
func submitAll(t testing.TB, hooks idem.Hooks, u string, keys ...string) {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"), journal.WithUnsafeNoSync())
	require.NoError(t, err)
	defer store.Close()
	c, err := idem.New(store, idem.WithHooks(hooks))
	require.NoError(t, err)
	defer c.Close()
	for _, k := range keys {
		_, err := c.Submit(context.Background(), idem.Request{Key: k, URL: u, Body: []byte(`{}`)})
		if !strings.HasPrefix(k, "reject") {
			require.NoError(t, err, k)
		}
	}
}

// Span attributes are built in pooled scratch and endpoint attributes are
// cached: each span must still carry exactly its own.
func TestEverySpanCarriesExactlyItsOwnAttributes(t *testing.T) {
	srv := outcomeServer(t)
	tel := newTelemetry(t, idemtest.NewClock(epoch))
	orders := srv.URL + "/orders?token=QUERY_SECRET"
	submitAll(t, tel.inst.Hooks(), orders, "ok-1", "reject-2", "ok-3")
	su, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(su.Port())
	require.NoError(t, err)

	type span struct {
		name  string
		kind  trace.SpanKind
		attrs string
	}
	var got []span
	for _, s := range tel.spans.Ended() {
		var kv []string
		for _, a := range s.Attributes() {
			kv = append(kv, string(a.Key)+"="+a.Value.Emit())
		}
		got = append(got, span{s.Name(), s.SpanKind(), strings.Join(kv, ",")})
	}
	endpoint := "http.request.method=POST,url.full=" + srv.URL + "/orders,server.address=127.0.0.1,server.port=" + strconv.Itoa(port)
	attempt := func(key, status string) span {
		return span{"POST", trace.SpanKindClient, endpoint + ",idem.key=" + key +
			",idem.attempt.number=1,idem.attempt.kind=submit,idem.attempt.wrote=true,http.response.status_code=" + status}
	}
	call := func(key, state string) span {
		return span{"idem call", trace.SpanKindInternal, "idem.key=" + key +
			",idem.scope=default,idem.call.kind=call,http.request.method=POST,idem.state=" + state}
	}
	want := []span{
		attempt("ok-1", "201"), call("ok-1", "succeeded"),
		attempt("reject-2", "422"), call("reject-2", "failed"),
		attempt("ok-3", "201"), call("ok-3", "succeeded"),
	}
	require.Equal(t, want, got)
}

// With a no-op tracer the layer skips building spans: the metrics must
// be those it reports with a recording tracer.
func TestMetricsAreTheSameWithANoopTracer(t *testing.T) {
	srv := outcomeServer(t)
	keys := []string{"ok-1", "reject-2", "ok-3"}
	traced := newTelemetry(t, idemtest.NewClock(epoch))
	submitAll(t, traced.inst.Hooks(), srv.URL+"/orders", keys...)

	reader := sdkmetric.NewManualReader()
	inst, err := idemotel.New(idemotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		idemotel.WithTracerProvider(noop.NewTracerProvider()))
	require.NoError(t, err)
	submitAll(t, inst.Hooks(), srv.URL+"/orders", keys...)
	untraced := &telemetry{reader: reader}

	want, got := traced.metrics(t), untraced.metrics(t)
	for _, name := range []string{idemotel.MetricAttempts, idemotel.MetricAttemptDuration,
		idemotel.MetricOperationOutcomes, idemotel.MetricOperationDuration} {
		require.NotEmpty(t, want[name], name)
		require.Equal(t, want[name], got[name], name)
	}
	require.Equal(t, map[string]float64{
		"idem.attempt.kind=submit,idem.attempt.status_class=2xx": 2,
		"idem.attempt.kind=submit,idem.attempt.status_class=4xx": 1,
	}, got[idemotel.MetricAttempts])
}
