// Package idemotel reports an idem Client's operations to OpenTelemetry:
// counters, histograms and gauges through a MeterProvider, and a span per
// operation call with a child span per HTTP attempt through a
// TracerProvider. The caller's trace context is journaled with each new
// operation, so that a later Resume or Run visit, in this process or
// after a restart, links back to the trace that started it. A Run visit
// starts a trace of its own, whatever span Run's context carries.
//
//	inst, err := idemotel.New(idemotel.WithMeterProvider(mp), idemotel.WithTracerProvider(tp))
//	c, err := idem.Open(path, idem.WithHooks(inst.Hooks()))
//	reg, err := inst.Observe(c) // the gauges; reg.Unregister() before c.Close()
//
// Spans carry the operation's key, method and journaled URL without its
// query string or user information (idem cannot tell every secret
// there), never a body or a header; a failed call's span status is its
// error's text, which holds the server's reason (at most 512 bytes of
// it, as every status description), the request's URL in it cut as
// url.full is. Metrics carry none of these: their attributes take a few
// values each (outcome, attempt kind, status class, call kind, state),
// never the key.
//
// The hooks run on the send path: give the TracerProvider a batching span
// processor (sdktrace.WithBatcher), not WithSyncer, whose export to a
// collector that does not answer would hold each attempt's end past the
// call's deadline, its operation's lease held.
package idemotel

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/recordable"
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
	MetricNewerOpen         = "idem.operations.newer_open"         // gauge {operation}
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
// the wall clock, which a nil clk keeps.
func WithClock(clk idem.Clock) Option {
	return optionFunc(func(c *config) {
		// New runs at start-up: a nil clock must not panic the service.
		if clk != nil {
			c.now = clk.Now
		}
	})
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
	newerOpen                metric.Int64ObservableGauge
	prop                     propagation.TraceContext
	now                      func() time.Time
	noopTracer               bool // spans are never recorded: skip building them
	endpoints                endpointCache

	// The Clients Observe was given, reported by one callback,
	// registered by the first Observe and never removed (it observes
	// nothing while obs is empty). obsMu is never held across a call
	// into the SDK, which holds its own lock around the callback.
	obsOnce sync.Once
	obsErr  error
	obsMu   sync.Mutex
	obs     []*observation
}

// observation is one Observe call's Client, and its Registration.
type observation struct {
	embedded.Registration
	i *Instrumentation
	c *idem.Client
}

// New creates the instruments.
func New(opts ...Option) (*Instrumentation, error) {
	cfg := config{}
	for _, o := range opts {
		// Skipped, as idem.New and admin.NewHandler skip one.
		if o != nil {
			o.apply(&cfg)
		}
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
	_, i.noopTracer = cfg.tp.(noop.TracerProvider)
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
		metric.WithDescription("Operations flagged for a person, open or settled."))
	add(err)
	i.oldestUnknown, err = m.Float64ObservableGauge(MetricOldestUnknownAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest unknown operation; 0 if none."))
	add(err)
	i.tokens, err = m.Float64ObservableGauge(MetricRetryTokens, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens in the retry budget of the host that holds least."))
	add(err)
	i.newerOpen, err = m.Int64ObservableGauge(MetricNewerOpen, metric.WithUnit("{operation}"),
		metric.WithDescription("Open operations written by a newer idem (a rollback left them): settled by no one until it runs again."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("idemotel: creating instruments"), err)
	}
	return i, nil
}

// Observe registers the gauges for c; they read c.Stats on every
// collection (its cost grows with the open operations). Unregister the
// registration before closing c. The gauges of several Clients observed
// at once are their totals (the flagged and unknown operations of all of
// them, the oldest unknown of any, the retry budget that holds least); a
// Client observed twice is counted once.
func (i *Instrumentation) Observe(c *idem.Client) (metric.Registration, error) {
	// One callback for every Client: gauges without attributes, each
	// observed once per Client, would keep the last Client's value alone,
	// and one with nothing flagged hide another's flagged operations.
	i.obsOnce.Do(func() {
		_, err := i.meter.RegisterCallback(i.observeAll, i.open, i.unknown, i.flagged, i.oldestUnknown, i.tokens, i.newerOpen)
		if err != nil {
			i.obsErr = errors.Join(errors.New("idemotel: registering gauges"), err)
		}
	})
	if i.obsErr != nil {
		return nil, i.obsErr
	}
	o := &observation{i: i, c: c}
	i.obsMu.Lock()
	i.obs = append(i.obs, o)
	i.obsMu.Unlock()
	return o, nil
}

// Unregister stops reporting the observation's Client; it may be called
// more than once.
func (o *observation) Unregister() error {
	o.i.obsMu.Lock()
	defer o.i.obsMu.Unlock()
	o.i.obs = slices.DeleteFunc(o.i.obs, func(x *observation) bool { return x == o })
	return nil
}

// observeAll reports the gauges of every observed Client. A Client whose
// Stats fail leaves the others reported, and its error is returned.
func (i *Instrumentation) observeAll(ctx context.Context, o metric.Observer) error {
	i.obsMu.Lock()
	obs := slices.Clone(i.obs)
	i.obsMu.Unlock()
	var (
		errs                   []error
		read                   bool
		open, unknown, flagged int
		newerOpen              int
		oldest                 time.Time
		tokens                 float64
	)
	for k, ob := range obs {
		if slices.ContainsFunc(obs[:k], func(x *observation) bool { return x.c == ob.c }) {
			continue // observed twice: its operations are counted once
		}
		st, err := ob.c.Stats(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		open, unknown, flagged = open+st.Open, unknown+st.ByState[idem.StateUnknown], flagged+st.Review
		newerOpen += st.NewerOpen
		if !st.OldestUnknown.IsZero() && (oldest.IsZero() || st.OldestUnknown.Before(oldest)) {
			oldest = st.OldestUnknown
		}
		if !read || st.RetryTokens < tokens {
			tokens = st.RetryTokens
		}
		read = true
	}
	if !read {
		return errors.Join(errs...)
	}
	o.ObserveInt64(i.open, int64(open))
	o.ObserveInt64(i.unknown, int64(unknown))
	o.ObserveInt64(i.flagged, int64(flagged))
	o.ObserveInt64(i.newerOpen, int64(newerOpen))
	age := 0.0
	if !oldest.IsZero() {
		age = max(0, i.now().Sub(oldest).Seconds())
	}
	o.ObserveFloat64(i.oldestUnknown, age)
	o.ObserveFloat64(i.tokens, tokens)
	return errors.Join(errs...)
}

// Hooks returns the hooks to pass to idem.WithHooks.
func (i *Instrumentation) Hooks() idem.Hooks {
	return idem.Hooks{
		Trace:   i.trace,
		Call:    i.call,
		Attempt: i.attempt,
		Settle: func(ctx context.Context, r *idem.Result) {
			i.outcomes.Add(ctx, 1, outcomeOpts(string(r.State))...)
		},
		Review: func(ctx context.Context, r *idem.Result) {
			i.outcomes.Add(ctx, 1, outcomeOpts("review")...)
			trace.SpanFromContext(ctx).AddEvent("idem.flagged", trace.WithAttributes(AttrReview.String(r.Review)))
		},
		Handoff: func(ctx context.Context, _ *idem.Result) {
			i.outcomes.Add(ctx, 1, outcomeOpts("handed_off")...)
		},
	}
}

// measurement holds the options of one attribute set, built once: each
// metric.WithAttributeSet call allocates, and so does the variadic slice
// of a single option passed to an instrument.
type measurement struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasurement(kv ...attribute.KeyValue) measurement {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return measurement{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

var outcomeMeasurements = func() map[string]measurement {
	m := map[string]measurement{}
	for _, o := range []string{"succeeded", "failed", "review", "handed_off"} {
		m[o] = newMeasurement(AttrOutcome.String(o))
	}
	return m
}()

func outcomeOpts(o string) []metric.AddOption {
	if m, ok := outcomeMeasurements[o]; ok {
		return m.add
	}
	return newMeasurement(AttrOutcome.String(o)).add
}

// traceCarrier holds the two W3C headers without the map a
// propagation.MapCarrier costs.
type traceCarrier struct{ parent, state string }

func (c *traceCarrier) Get(k string) string {
	switch k {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *traceCarrier) Set(k, v string) {
	switch k {
	case "traceparent":
		c.parent = v
	case "tracestate":
		c.state = v
	}
}

func (c *traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// trace is the caller's W3C trace context: traceparent, then tracestate
// after a newline (neither may hold one).
func (i *Instrumentation) trace(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c traceCarrier
	i.prop.Inject(ctx, &c)
	if c.state != "" {
		return c.parent + "\n" + c.state
	}
	return c.parent
}

// journaled is the span context a journaled trace names.
func (i *Instrumentation) journaled(s string) trace.SpanContext {
	if s == "" {
		return trace.SpanContext{}
	}
	var c traceCarrier
	c.parent, c.state, _ = strings.Cut(s, "\n")
	return trace.SpanContextFromContext(i.prop.Extract(context.Background(), &c))
}

// callState is what a call's attempt spans need, worked out once per
// call rather than on every attempt.
type callState struct {
	submit    []attribute.KeyValue // method and URL attributes of a submit; shared, read-only
	submitURL string               // as journaled: an error's text quotes it so
	// The query's, worked out on the first query: most calls make none.
	resultURL string
	queryOnce sync.Once
	query     []attribute.KeyValue
}

func (cs *callState) queryAttrs() []attribute.KeyValue {
	cs.queryOnce.Do(func() { cs.query = endpointAttrs(http.MethodGet, cs.resultURL) })
	return cs.query
}

type callStateKey struct{}

// endpointAttrs are the HTTP semantic-convention attributes of a request
// to u. The query string is left out: it may hold a secret idem cannot
// recognise (credentials belong in a request hook, which is never seen).
func endpointAttrs(method, u string) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 4)
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

// maxStatusDescription bounds a span's status description, as the
// journal bounds an attempt's error: the SDK's SpanLimits bound attribute
// values, never a status description.
const maxStatusDescription = 512

// errorDescription is err's text for a span status, with the URLs it
// quotes cut as url.full is, for the same reason, and at most
// maxStatusDescription bytes of it: net/http quotes a malformed status
// line whole (up to its Transport's MaxResponseHeaderBytes, 10 MiB by
// default), and every attempt's span would carry it. The URLs are the
// one its *url.Error names and urls (an attempt's URL as journaled,
// which idem's text names in place of the one the request hook made);
// each is cut quoted, as net/http quotes it, and bare, as a Transport's
// or a request hook's own words quote it (go-retryablehttp's "POST <URL>
// giving up after N attempt(s)").
func errorDescription(err error, urls ...string) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = withoutQuery(msg, ue.URL)
	}
	for _, u := range urls {
		msg = withoutQuery(msg, u)
	}
	return recordable.Clip(msg, maxStatusDescription)
}

// withoutQuery is msg with u, quoted or bare, cut as url.full is. A URL
// that does not parse was never sent: Request's URLs are checked before
// they are journaled.
func withoutQuery(msg, u string) string {
	pu, err := url.Parse(u)
	if u == "" || err != nil {
		return msg
	}
	pu.User, pu.RawQuery, pu.ForceQuery, pu.Fragment = nil, "", false, ""
	cut := pu.String()
	if cut == u {
		return msg
	}
	// Quoted too: %q escapes a '"' or '\' of the query (a search
	// filter's quotes), and the bare form is then not in its text.
	msg = strings.ReplaceAll(msg, strconv.Quote(u), strconv.Quote(cut))
	return strings.ReplaceAll(msg, u, cut)
}

// endpoint is the key of endpointCache.
type endpoint struct{ method, url string }

// endpointCacheSize bounds endpointCache: a service calls a few
// endpoints, but URLs holding an ID would otherwise grow it without end
// (past the bound they are worked out on each call, as before).
const endpointCacheSize = 256

// endpointCache holds the submit attributes of the endpoints seen, so
// that a call does not parse and re-format its URL.
type endpointCache struct {
	mu sync.RWMutex
	m  map[endpoint][]attribute.KeyValue
}

func (c *endpointCache) attrs(method, u string) []attribute.KeyValue {
	k := endpoint{method, u}
	c.mu.RLock()
	kv, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return kv
	}
	kv = endpointAttrs(method, u)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[endpoint][]attribute.KeyValue{}
	}
	if len(c.m) < endpointCacheSize {
		c.m[k] = kv
	}
	c.mu.Unlock()
	return kv
}

// Span start options that never change.
var (
	internalSpan = trace.WithSpanKind(trace.SpanKindInternal)
	clientSpan   = trace.WithSpanKind(trace.SpanKindClient)
	// newRoot starts a Run visit's trace: Run's context is the process's
	// (a start-up span, say), which every visit would otherwise join.
	newRoot = trace.WithNewRoot()
	// journaledLink is the attributes of a link to the journaled trace;
	// the SDK keeps the slice, and never writes to it.
	journaledLink = []attribute.KeyValue{attribute.String("idem.link", "journaled")}
)

// spanArgs is the scratch a span start is built in, pooled: the SDK
// copies the attributes into the span before Start returns (the link's
// attributes, which it keeps, are never in here).
type spanArgs struct {
	attrs []attribute.KeyValue
	opts  []trace.SpanStartOption
	end   []trace.SpanEndOption
}

var spanArgsPool = sync.Pool{New: func() any {
	return &spanArgs{attrs: make([]attribute.KeyValue, 0, 12), opts: make([]trace.SpanStartOption, 0, 4),
		end: make([]trace.SpanEndOption, 0, 1)}
}}

func getSpanArgs() *spanArgs { return spanArgsPool.Get().(*spanArgs) }

func putSpanArgs(a *spanArgs) {
	clear(a.attrs[:cap(a.attrs)]) // drop the strings they hold
	clear(a.opts[:cap(a.opts)])
	clear(a.end[:cap(a.end)])
	a.attrs, a.opts, a.end = a.attrs[:0], a.opts[:0], a.end[:0]
	spanArgsPool.Put(a)
}

var callSpanNames = map[string]string{"call": "idem call", "resume": "idem resume", "reconcile": "idem reconcile"}

func callSpanName(kind string) string {
	if n, ok := callSpanNames[kind]; ok {
		return n
	}
	return "idem " + kind
}

// callSpan is one call's span, the state its attempts need and what
// its end records: one allocation (the closure of a func literal would
// move the context and the whole CallEvent to the heap besides).
type callSpan struct {
	callState
	i     *Instrumentation
	ctx   context.Context
	span  trace.Span
	kind  string
	start time.Time
}

func (i *Instrumentation) call(ctx context.Context, ev idem.CallEvent) (context.Context, func(*idem.Result, error)) {
	c := &callSpan{i: i, kind: ev.Kind, start: time.Now()}
	if i.noopTracer {
		// A no-op tracer ignores every option: only its context matters
		// (it puts a non-recording span in it, as any tracer's would).
		c.ctx, c.span = i.tracer.Start(ctx, callSpanName(ev.Kind))
		return c.ctx, c.end
	}
	a := getSpanArgs()
	a.attrs = append(a.attrs, AttrKey.String(ev.Key), AttrScope.String(ev.Scope), AttrCallKind.String(ev.Kind),
		attribute.String("http.request.method", ev.Method))
	a.opts = append(a.opts, internalSpan, trace.WithAttributes(a.attrs...))
	parent := trace.SpanContextFromContext(ctx).TraceID()
	if ev.Kind == "reconcile" {
		a.opts, parent = append(a.opts, newRoot), trace.TraceID{}
	}
	if sc := i.journaled(ev.Trace); sc.IsValid() && sc.TraceID() != parent {
		a.opts = append(a.opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: journaledLink}))
	}
	ctx, c.span = i.tracer.Start(ctx, callSpanName(ev.Kind), a.opts...)
	putSpanArgs(a)
	if c.span.IsRecording() {
		c.submit, c.submitURL, c.resultURL = i.endpoints.attrs(ev.Method, ev.URL), ev.URL, ev.ResultURL
		ctx = context.WithValue(ctx, callStateKey{}, &c.callState)
	}
	c.ctx = ctx
	return ctx, c.end
}

// stateAttr holds the idem.state attribute of each state, as the
// one-element slice SetAttributes takes (the SDK copies it).
var stateAttr = func() map[idem.State][]attribute.KeyValue {
	m := map[idem.State][]attribute.KeyValue{}
	for _, s := range []idem.State{idem.StatePending, idem.StateProcessing, idem.StateSucceeded, idem.StateFailed, idem.StateUnknown} {
		m[s] = []attribute.KeyValue{AttrState.String(string(s))}
	}
	return m
}()

func stateAttrs(s idem.State) []attribute.KeyValue {
	if kv, ok := stateAttr[s]; ok {
		return kv
	}
	return []attribute.KeyValue{AttrState.String(string(s))}
}

func (c *callSpan) end(res *idem.Result, err error) {
	if res != nil {
		c.span.SetAttributes(stateAttrs(res.State)...)
	}
	if err != nil && !errors.Is(err, idem.ErrUnknownOutcome) {
		c.span.SetStatus(codes.Error, errorDescription(err))
	}
	c.span.End()
	c.i.recordCall(c.ctx, c.kind, res, c.start)
}

func (i *Instrumentation) recordCall(ctx context.Context, kind string, res *idem.Result, start time.Time) {
	state := idem.State("")
	if res != nil {
		state = res.State
	}
	i.operationDur.Record(ctx, time.Since(start).Seconds(), callOpts(kind, state)...)
}

func (i *Instrumentation) attempt(ctx context.Context, ev idem.AttemptEvent) {
	kind, class := 0, statusClass(ev.StatusCode)
	if ev.Query {
		kind = 1
	}
	m := attemptMeasurements[kind][class]
	i.attempts.Add(ctx, 1, m.add...)
	i.attemptDur.Record(ctx, ev.Duration.Seconds(), m.rec...)

	cs, _ := ctx.Value(callStateKey{}).(*callState)
	if cs == nil {
		return // not traced, or the call's span is not sampled
	}
	base, journaled := cs.submit, cs.submitURL
	if ev.Query {
		base, journaled = cs.queryAttrs(), cs.resultURL
	}
	a := getSpanArgs()
	a.attrs = append(append(a.attrs, base...),
		AttrKey.String(ev.Key), AttrAttempt.Int(ev.Number), AttrAttemptKind.String(attemptKinds[kind]), AttrWrote.Bool(ev.Wrote))
	if ev.StatusCode != 0 {
		a.attrs = append(a.attrs, attribute.Int("http.response.status_code", ev.StatusCode))
	}
	switch {
	case ev.StatusCode >= 500 || ev.StatusCode >= 400 && ev.Err != nil:
		// A server that answered named the error by its status, words
		// and all (a refused result query's 401 carries them as Err):
		// OpenTelemetry's error.type for an HTTP client.
		a.attrs = append(a.attrs, attribute.String("error.type", strconv.Itoa(ev.StatusCode)))
	case ev.Err != nil:
		a.attrs = append(a.attrs, attribute.String("error.type", "transport"))
	}
	a.opts = append(a.opts, clientSpan, trace.WithTimestamp(ev.Start), trace.WithAttributes(a.attrs...))
	_, span := i.tracer.Start(ctx, base[0].Value.AsString(), a.opts...)
	switch {
	case ev.Err != nil:
		span.SetStatus(codes.Error, errorDescription(ev.Err, journaled))
	case ev.StatusCode >= 500:
		span.SetStatus(codes.Error, "")
	}
	a.end = append(a.end, trace.WithTimestamp(ev.Start.Add(ev.Duration)))
	span.End(a.end...)
	putSpanArgs(a)
}

// callMeasurements holds the options of operation durations.
var callMeasurements = func() map[[2]string]measurement {
	m := map[[2]string]measurement{}
	for _, k := range []string{"call", "resume", "reconcile"} {
		for _, s := range []idem.State{"", idem.StatePending, idem.StateProcessing, idem.StateSucceeded, idem.StateFailed, idem.StateUnknown} {
			m[[2]string{k, string(s)}] = newMeasurement(AttrCallKind.String(k), AttrState.String(string(s)))
		}
	}
	return m
}()

func callOpts(kind string, state idem.State) []metric.RecordOption {
	if m, ok := callMeasurements[[2]string{kind, string(state)}]; ok {
		return m.rec
	}
	return newMeasurement(AttrCallKind.String(kind), AttrState.String(string(state))).rec
}

var (
	attemptKinds        = [2]string{"submit", "query"}
	statusClasses       = [6]string{"1xx", "2xx", "3xx", "4xx", "5xx", "error"}
	classError          = len(statusClasses) - 1
	attemptMeasurements = func() (m [len(attemptKinds)][len(statusClasses)]measurement) {
		for k, kind := range attemptKinds {
			for c, class := range statusClasses {
				m[k][c] = newMeasurement(AttrAttemptKind.String(kind), AttrStatusClass.String(class))
			}
		}
		return m
	}()
)

// statusClass is the index in statusClasses of a status code's class.
func statusClass(code int) int {
	if code < 100 || code > 599 {
		return classError
	}
	return code/100 - 1
}
