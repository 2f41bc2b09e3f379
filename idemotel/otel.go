// Package idemotel reports an idem Client's operations to OpenTelemetry:
// counters, histograms and gauges through a MeterProvider, and a span per
// operation call with a child span per HTTP attempt through a
// TracerProvider. The caller's trace context is journaled with each new
// operation, so that a later Resume or Run visit, in this process or
// after a restart, links back to the trace that started it.
//
//	inst, err := idemotel.New(idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(tp))
//	c, err := idem.Open(path, idem.WithHooks(inst.Hooks()))
//	reg, err := inst.Observe(c) // the gauges; reg.Unregister() before c.Close()
//
// Spans and metrics carry the operation's key, method and journaled URL,
// never a body or a header.
package idemotel

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/idemkit/idem/idemotel"

// Instrument names, in OpenTelemetry semantic-convention style.
const (
	MetricOperationOutcomes = "idem.operation.outcomes"            // counter {operation}: idem.outcome
	MetricAttempts          = "idem.attempts"                      // counter {attempt}: idem.attempt.kind, idem.attempt.status_class
	MetricAttemptDuration   = "idem.attempt.duration"              // histogram s: idem.attempt.kind, idem.attempt.status_class
	MetricOperationDuration = "idem.operation.duration"            // histogram s: idem.call.kind, idem.state
	MetricOpen              = "idem.operations.open"               // gauge {operation}
	MetricUnknown           = "idem.operations.unknown"            // gauge {operation}
	MetricFlagged           = "idem.operations.flagged"            // gauge {operation}
	MetricOldestUnknownAge  = "idem.operations.oldest_unknown.age" // gauge s
	MetricRetryTokens       = "idem.retry_budget.tokens"           // gauge {token}
)

// Attribute keys.
const (
	AttrOutcome     = attribute.Key("idem.outcome") // succeeded, failed, review, handed_off
	AttrAttemptKind = attribute.Key("idem.attempt.kind")
	AttrStatusClass = attribute.Key("idem.attempt.status_class") // 2xx … 5xx, or error
	AttrCallKind    = attribute.Key("idem.call.kind")            // call, resume, reconcile
	AttrState       = attribute.Key("idem.state")
	AttrKey         = attribute.Key("idem.key")
	AttrScope       = attribute.Key("idem.scope")
	AttrAttempt     = attribute.Key("idem.attempt.number")
	AttrWrote       = attribute.Key("idem.attempt.wrote")
	AttrReview      = attribute.Key("idem.review")
)

// An Option configures New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	mp  metric.MeterProvider
	tp  trace.TracerProvider
	now func() time.Time
}

// WithClock sets the clock the age gauge is measured with: the Client's
// (idem.WithClock), so that it agrees with the journal's times. Default:
// the wall clock.
func WithClock(clk idem.Clock) Option {
	return optionFunc(func(c *config) { c.now = clk.Now })
}

// WithMeterProvider sets the meter provider; default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithTracerProvider sets the tracer provider; default otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// Instrumentation holds the instruments; it is safe for concurrent use and
// may serve several Clients.
type Instrumentation struct {
	meter                    metric.Meter
	tracer                   trace.Tracer
	outcomes, attempts       metric.Int64Counter
	attemptDur, operationDur metric.Float64Histogram
	open, unknown, flagged   metric.Int64ObservableGauge
	oldestUnknown, tokens    metric.Float64ObservableGauge
	prop                     propagation.TraceContext
	now                      func() time.Time
}

// New creates the instruments.
func New(opts ...Option) (*Instrumentation, error) {
	cfg := config{}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	i := &Instrumentation{meter: cfg.mp.Meter(ScopeName), tracer: cfg.tp.Tracer(ScopeName), now: cfg.now}
	m := i.meter
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	i.outcomes, err = m.Int64Counter(MetricOperationOutcomes, metric.WithUnit("{operation}"),
		metric.WithDescription("Operations settled, flagged for review or handed to the reconciler."))
	add(err)
	i.attempts, err = m.Int64Counter(MetricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("HTTP exchanges: submits and result queries."))
	add(err)
	i.attemptDur, err = m.Float64Histogram(MetricAttemptDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of one HTTP exchange."))
	add(err)
	i.operationDur, err = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of a call driving an operation (Do, Submit, a Resume or Run visit)."))
	add(err)
	i.open, err = m.Int64ObservableGauge(MetricOpen, metric.WithUnit("{operation}"),
		metric.WithDescription("Operations not settled yet: pending, processing or unknown."))
	add(err)
	i.unknown, err = m.Int64ObservableGauge(MetricUnknown, metric.WithUnit("{operation}"),
		metric.WithDescription("Operations whose outcome is unknown."))
	add(err)
	i.flagged, err = m.Int64ObservableGauge(MetricFlagged, metric.WithUnit("{operation}"),
		metric.WithDescription("Open operations flagged for a person."))
	add(err)
	i.oldestUnknown, err = m.Float64ObservableGauge(MetricOldestUnknownAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest unknown operation; 0 if none."))
	add(err)
	i.tokens, err = m.Float64ObservableGauge(MetricRetryTokens, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens in the client-wide retry budget."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("idemotel: creating instruments"), err)
	}
	return i, nil
}

// Observe registers the gauges for c; they read c.Stats on every
// collection (its cost grows with the open operations). Unregister the
// registration before closing c.
func (i *Instrumentation) Observe(c *idem.Client) (metric.Registration, error) {
	reg, err := i.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(i.open, int64(st.Open))
		o.ObserveInt64(i.unknown, int64(st.ByState[idem.StateUnknown]))
		o.ObserveInt64(i.flagged, int64(st.Review))
		age := 0.0
		if !st.OldestUnknown.IsZero() {
			age = max(0, i.now().Sub(st.OldestUnknown).Seconds())
		}
		o.ObserveFloat64(i.oldestUnknown, age)
		o.ObserveFloat64(i.tokens, st.RetryTokens)
		return nil
	}, i.open, i.unknown, i.flagged, i.oldestUnknown, i.tokens)
	if err != nil {
		return nil, errors.Join(errors.New("idemotel: registering gauges"), err)
	}
	return reg, nil
}

// Hooks returns the hooks to pass to idem.WithHooks.
func (i *Instrumentation) Hooks() idem.Hooks {
	return idem.Hooks{
		Trace:   i.trace,
		Call:    i.call,
		Attempt: i.attempt,
		Settle: func(ctx context.Context, r *idem.Result) {
			i.outcomes.Add(ctx, 1, metric.WithAttributeSet(outcomeSet(string(r.State))))
		},
		Review: func(ctx context.Context, r *idem.Result) {
			i.outcomes.Add(ctx, 1, metric.WithAttributeSet(outcomeSet("review")))
			trace.SpanFromContext(ctx).AddEvent("idem.flagged", trace.WithAttributes(AttrReview.String(r.Review)))
		},
		Handoff: func(ctx context.Context, _ *idem.Result) {
			i.outcomes.Add(ctx, 1, metric.WithAttributeSet(outcomeSet("handed_off")))
		},
	}
}

var outcomeSets = map[string]attribute.Set{}

func init() {
	for _, o := range []string{"succeeded", "failed", "review", "handed_off"} {
		outcomeSets[o] = attribute.NewSet(AttrOutcome.String(o))
	}
}

func outcomeSet(o string) attribute.Set {
	if s, ok := outcomeSets[o]; ok {
		return s
	}
	return attribute.NewSet(AttrOutcome.String(o))
}

// trace is the caller's W3C trace context: traceparent, then tracestate
// after a newline (neither may hold one).
func (i *Instrumentation) trace(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	i.prop.Inject(ctx, c)
	if ts := c["tracestate"]; ts != "" {
		return c["traceparent"] + "\n" + ts
	}
	return c["traceparent"]
}

// journaled is the span context a journaled trace names.
func (i *Instrumentation) journaled(s string) trace.SpanContext {
	if s == "" {
		return trace.SpanContext{}
	}
	tp, ts, _ := strings.Cut(s, "\n")
	ctx := i.prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
	return trace.SpanContextFromContext(ctx)
}

// callState is what a call's attempt spans need, worked out once per
// call rather than on every attempt.
type callState struct {
	submit, query []attribute.KeyValue // method and URL attributes of each kind of exchange
}

type callStateKey struct{}

// endpointAttrs are the HTTP semantic-convention attributes of a request
// to u. The query string is left out: it may hold a secret idem cannot
// recognise (credentials belong in a request hook, which is never seen).
func endpointAttrs(method, u string) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 12) // room for the attempt's own
	kv = append(kv, attribute.String("http.request.method", method))
	pu, err := url.Parse(u)
	if err != nil || u == "" {
		return kv
	}
	pu.User, pu.RawQuery, pu.ForceQuery, pu.Fragment = nil, "", false, ""
	kv = append(kv, attribute.String("url.full", pu.String()), attribute.String("server.address", pu.Hostname()))
	if p, err := strconv.Atoi(pu.Port()); err == nil {
		kv = append(kv, attribute.Int("server.port", p))
	}
	return kv
}

func (i *Instrumentation) call(ctx context.Context, ev idem.CallEvent) (context.Context, func(*idem.Result, error)) {
	start := time.Now()
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrKey.String(ev.Key), AttrScope.String(ev.Scope), AttrCallKind.String(ev.Kind),
			attribute.String("http.request.method", ev.Method)),
	}
	if sc := i.journaled(ev.Trace); sc.IsValid() && sc.TraceID() != trace.SpanContextFromContext(ctx).TraceID() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
			attribute.String("idem.link", "journaled"),
		}}))
	}
	ctx, span := i.tracer.Start(ctx, "idem "+ev.Kind, opts...)
	if span.IsRecording() {
		ctx = context.WithValue(ctx, callStateKey{}, &callState{
			submit: endpointAttrs(ev.Method, ev.URL), query: endpointAttrs(http.MethodGet, ev.ResultURL),
		})
	}
	return ctx, func(res *idem.Result, err error) {
		if res != nil {
			span.SetAttributes(AttrState.String(string(res.State)))
		}
		if err != nil && !errors.Is(err, idem.ErrUnknownOutcome) {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		i.recordCall(ctx, ev.Kind, res, start)
	}
}

func (i *Instrumentation) recordCall(ctx context.Context, kind string, res *idem.Result, start time.Time) {
	state := idem.State("")
	if res != nil {
		state = res.State
	}
	i.operationDur.Record(ctx, time.Since(start).Seconds(), metric.WithAttributeSet(callSet(kind, state)))
}

func (i *Instrumentation) attempt(ctx context.Context, ev idem.AttemptEvent) {
	class := statusClass(ev)
	attrs := metric.WithAttributeSet(attemptSet(ev.Query, class))
	i.attempts.Add(ctx, 1, attrs)
	i.attemptDur.Record(ctx, ev.Duration.Seconds(), attrs)

	cs, _ := ctx.Value(callStateKey{}).(*callState)
	if cs == nil {
		return // not traced, or the call's span is not sampled
	}
	kind, base := "submit", cs.submit
	if ev.Query {
		kind, base = "query", cs.query
	}
	sa := append(base[:len(base):len(base)],
		AttrKey.String(ev.Key), AttrAttempt.Int(ev.Number), AttrAttemptKind.String(kind), AttrWrote.Bool(ev.Wrote))
	if ev.StatusCode != 0 {
		sa = append(sa, attribute.Int("http.response.status_code", ev.StatusCode))
	}
	switch {
	case ev.Err != nil:
		sa = append(sa, attribute.String("error.type", "transport"))
	case ev.StatusCode >= 500:
		sa = append(sa, attribute.String("error.type", strconv.Itoa(ev.StatusCode)))
	}
	_, span := i.tracer.Start(ctx, base[0].Value.AsString(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(ev.Start), trace.WithAttributes(sa...))
	switch {
	case ev.Err != nil:
		span.SetStatus(codes.Error, ev.Err.Error())
	case ev.StatusCode >= 500:
		span.SetStatus(codes.Error, "")
	}
	span.End(trace.WithTimestamp(ev.Start.Add(ev.Duration)))
}

// callSets holds the attribute sets of operation durations.
var callSets = func() map[[2]string]attribute.Set {
	m := map[[2]string]attribute.Set{}
	for _, k := range []string{"call", "resume", "reconcile"} {
		for _, s := range []idem.State{"", idem.StatePending, idem.StateProcessing, idem.StateSucceeded, idem.StateFailed, idem.StateUnknown} {
			m[[2]string{k, string(s)}] = attribute.NewSet(AttrCallKind.String(k), AttrState.String(string(s)))
		}
	}
	return m
}()

func callSet(kind string, state idem.State) attribute.Set {
	if s, ok := callSets[[2]string{kind, string(state)}]; ok {
		return s
	}
	return attribute.NewSet(AttrCallKind.String(kind), AttrState.String(string(state)))
}

func statusClass(ev idem.AttemptEvent) string {
	if ev.StatusCode < 100 || ev.StatusCode > 599 {
		return "error"
	}
	return strconv.Itoa(ev.StatusCode/100) + "xx"
}

// attemptSets holds the attribute sets of every (kind, class): built once,
// since attempts are on the hot path.
var attemptSets = func() map[[2]string]attribute.Set {
	m := map[[2]string]attribute.Set{}
	for _, k := range []string{"submit", "query"} {
		for _, c := range []string{"1xx", "2xx", "3xx", "4xx", "5xx", "error"} {
			m[[2]string{k, c}] = attribute.NewSet(AttrAttemptKind.String(k), AttrStatusClass.String(c))
		}
	}
	return m
}()

func attemptSet(query bool, class string) attribute.Set {
	k := "submit"
	if query {
		k = "query"
	}
	return attemptSets[[2]string{k, class}]
}
