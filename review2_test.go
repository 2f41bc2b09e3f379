package idem_test

// Second adversarial review of the root package. Each test failed on the
// code as reviewed and is kept as a regression test.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func scriptedResponse(req *http.Request, status int) *http.Response {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	body := `{"error":"scripted"}`
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// forwardUntraced sends req to base in a context without idem's trace, as a
// transport that reports no httptrace events (HTTP/3, a mesh SDK, a mock)
// would: the server gets it and performs it; idem hears nothing.
func forwardUntraced(base http.RoundTripper, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	_ = req.Body.Close()
	r2 := req.Clone(context.Background())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	if resp, err := base.RoundTrip(r2); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// submitTransport plays one function per submit (POST), in order; queries
// and later submits go to base.
func submitTransport(base *http.RoundTripper, steps ...func(*http.Request) (*http.Response, error)) http.RoundTripper {
	var mu sync.Mutex
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			mu.Lock()
			var st func(*http.Request) (*http.Response, error)
			if len(steps) > 0 {
				st, steps = steps[0], steps[1:]
			}
			mu.Unlock()
			if st != nil {
				return st(req)
			}
		}
		return (*base).RoundTrip(req)
	})
}

// Outcome table: "a transport that reports no trace events gets no benefit
// of the doubt". The verdict honoured that (ambiguous), but the journal
// recorded the attempt as not written, so maybeSent forgot it: the resend's
// 401 (an expired credential at a gateway) then settled as failed an order
// the server had performed. The caller, told ErrFailed, retries under a new
// key: a second charge.
func TestReview2UntracedTransportErrorIsMaybeSent(t *testing.T) {
	var base http.RoundTripper
	tr := submitTransport(&base,
		func(req *http.Request) (*http.Response, error) {
			forwardUntraced(base, req)
			return nil, errors.New("stream reset: response lost")
		},
		func(req *http.Request) (*http.Response, error) {
			return scriptedResponse(req, http.StatusUnauthorized), nil
		},
	)
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithHTTPClient(&http.Client{Transport: tr})))
	base = e.srv.Client().Transport

	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "the order was performed once")
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State, "a performed order is journaled failed")
	require.NotEqual(t, idem.StateFailed, e.record("k").State)
}

// "Not written" must mean that no connection ever had the request. net/http
// hands the request to a connection (GotConn) and writes it on another
// goroutine; when the attempt's context ends, roundTrip can return before
// WroteRequest fires although the bytes are on the wire (and transport
// wrappers that time out do the same). Counting that as "never sent" let a
// later 4xx fail a performed order.
func TestReview2ErrorAfterGotConnIsMaybeSent(t *testing.T) {
	var base http.RoundTripper
	tr := submitTransport(&base,
		func(req *http.Request) (*http.Response, error) {
			if tr := httptrace.ContextClientTrace(req.Context()); tr != nil {
				if tr.GetConn != nil {
					tr.GetConn(req.URL.Host)
				}
				if tr.GotConn != nil {
					tr.GotConn(httptrace.GotConnInfo{})
				}
			}
			forwardUntraced(base, req)
			return nil, context.DeadlineExceeded
		},
		func(req *http.Request) (*http.Response, error) {
			return scriptedResponse(req, http.StatusForbidden), nil
		},
	)
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithHTTPClient(&http.Client{Transport: tr})))
	base = e.srv.Client().Transport

	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State)
}

// A dial that fails before any connection is had is still "never sent"
// (the fix above must not make every refused dial ambiguous).
func TestReview2RefusedDialStillNotSent(t *testing.T) {
	e := newEnv(t, script(step{err: dialRefused}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Zero(t, e.queries("k"), "a refused dial was treated as maybe sent")
	rec := e.record("k")
	require.False(t, rec.Attempts[0].Wrote)
}

// Shutdown: "Calls in flight (Do, Submit) carry on until they settle". A
// Submit that joined a Resume visit for the same key got the visit's
// ErrClosed when Shutdown drained the background work, and was stopped
// with ErrUnknownOutcome although its own context and Shutdown's were alive.
func TestReview2ShutdownLetsForegroundJoinerOfResumeFinish(t *testing.T) {
	e, g := gatedEnv(t)
	_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	resumed := make(chan error, 1)
	go func() {
		_, err := e.client.Resume(e.ctx)
		resumed <- err
	}()
	waitEntered(t, g) // Resume's visit is sending "k"
	sub := make(chan callResult, 1)
	go func() {
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		sub <- callResult{res, err}
	}()
	waitJoined(t, 1)

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shut <- e.client.Shutdown(ctx)
	}()
	require.ErrorIs(t, within(t, resumed, "Resume drained by Shutdown"), idem.ErrClosed)
	close(g.release)
	got := within(t, sub, "Submit")
	require.NoError(t, got.err, "the foreground call was stopped by a graceful Shutdown")
	require.Equal(t, idem.StateSucceeded, got.res.State)
	require.NoError(t, within(t, shut, "Shutdown"))
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// Joining must not import the leader's cancellation, whatever its cause:
// a leader cancelled with context.WithCancelCause ended the joined caller
// too (only context.Canceled and DeadlineExceeded were recognised).
func TestReview2JoinerIgnoresLeaderCancelCause(t *testing.T) {
	e, g := gatedEnv(t)
	lctx, cancel := context.WithCancelCause(e.ctx)
	first := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(lctx, e.req("k", `{}`))
		first <- err
	}()
	waitEntered(t, g)
	second := make(chan callResult, 1)
	go func() {
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		second <- callResult{res, err}
	}()
	waitJoined(t, 1)
	aborted := errors.New("upstream request aborted")
	cancel(aborted)
	require.ErrorIs(t, within(t, first, "leader"), aborted)
	close(g.release)
	got := within(t, second, "joiner")
	require.NoError(t, got.err, "the joined caller inherited another caller's cancellation")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// pollBlockClock is the env's manual clock, except that Run's poll (5 s)
// blocks until ctx ends, so Run makes exactly one pass.
type pollBlockClock struct{ *idemtest.Clock }

func (c pollBlockClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == 5*time.Second {
		<-ctx.Done()
		return ctx.Err()
	}
	return c.Clock.Sleep(ctx, d)
}

// Do "drives a journaled operation until it settles or the call's budget
// is spent". A Do that joined the reconciler's visit (which never waits:
// one 503 and it reschedules) returned the reconciler's ErrBudgetSpent
// after one exchange, with its own budget untouched.
func TestReview2ForegroundJoinerOfReconcilerKeepsItsBudget(t *testing.T) {
	clk := pollBlockClock{}
	e, g := gatedEnv(t, clientOpts(idem.WithClock(&clk)))
	clk.Clock = e.clock
	_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", RetryAfter: time.Second}))
	e.clock.Advance(time.Minute) // due

	rctx, stop := context.WithCancel(e.ctx)
	ran := make(chan error, 1)
	go func() { ran <- e.client.Run(rctx) }()
	waitEntered(t, g) // the reconciler is sending "k"
	op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
	require.NoError(t, err)
	done := make(chan callResult, 1)
	go func() {
		res, err := e.client.Do(e.ctx, op)
		done <- callResult{res, err}
	}()
	waitJoined(t, 1)
	close(g.release)
	got := within(t, done, "Do")
	stop()
	within(t, ran, "Run")
	require.NoError(t, got.err, "Do returned the reconciler's hand-off")
	require.Equal(t, idem.StateSucceeded, got.res.State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// Credentials: "added at send time ... and are never written to disk". A
// request hook that puts the API key in the query string (as some APIs
// want) had it written to the journal and the log: net/http's *url.Error
// text carries the full URL, and idem stored and logged that text.
func TestReview2HookCredentialInURLNotJournaledOrLogged(t *testing.T) {
	const secret = "sk_live_QUERY_SECRET"
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events []idem.AttemptEvent
	e := newEnv(t, script(step{err: dialRefused}), clientOpts(
		idem.WithLogger(logger),
		idem.WithHooks(idem.Hooks{Attempt: func(ev idem.AttemptEvent) { events = append(events, ev) }}),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", scope)
			q := r.URL.Query()
			q.Set("api_key", secret)
			r.URL.RawQuery = q.Encode()
			return nil
		})))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	rec := e.record("k")
	for _, a := range rec.Attempts {
		require.NotContains(t, a.Err, secret, "a credential was journaled")
	}
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	raw, err := os.ReadFile(e.path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(secret)), "a credential is in the journal file")
	mu.Lock()
	require.NotContains(t, logs.String(), secret, "a credential was logged")
	mu.Unlock()
	require.NotEmpty(t, events)
	require.Error(t, events[0].Err)
	require.NotContains(t, events[0].Err.Error(), secret)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Run's contract: "Run returns ctx.Err() when ctx ends, ErrClosed when the
// Client is closed, or an error if the journal fails". On Close, a visit
// already handed to a worker read the journal with the drained context and
// Run reported "idem: journal: context canceled", a broken journal, and
// visitAll went on starting visits after its context ended.
func TestReview2RunReturnsErrClosedNotJournalError(t *testing.T) {
	clk := pollBlockClock{}
	e, g := gatedEnv(t, clientOpts(idem.WithClock(&clk), idem.WithResumeConcurrency(1)))
	clk.Clock = e.clock
	for _, k := range []string{"a", "b", "c"} {
		_, err := e.client.Prepare(e.ctx, e.req(k, `{}`))
		require.NoError(t, err)
	}
	e.clock.Advance(time.Minute)
	ran := make(chan error, 1)
	go func() { ran <- e.client.Run(e.ctx) }()
	waitEntered(t, g) // the one worker is sending the first; the next waits for it
	require.NoError(t, e.client.Close())
	err := within(t, ran, "Run")
	require.ErrorIs(t, err, idem.ErrClosed)
	require.Zero(t, len(e.srv.Requests()), "nothing was released")
	close(g.release)
	n := 0
	for _, k := range []string{"a", "b", "c"} {
		if len(e.record(k).Attempts) > 0 {
			n++
		}
	}
	require.Equal(t, 1, n, "visits started after Run's context ended")
}

// Shutdown "returns ctx's error if it had to stop calls". With no call in
// flight it had nothing to stop, yet a done ctx made it return an error
// half of the time (select between two ready cases).
func TestReview2ShutdownIdleReportsNothingStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 40 {
		e := newEnv(t)
		require.NoError(t, e.client.Shutdown(ctx))
	}
}

// WithMaxResponseBytes(math.MaxInt64) ("no limit") overflowed the read
// limit to a negative one: every body read empty, every 2xx was
// "undecodable", and no operation could ever settle.
func TestReview2MaxResponseBytesUnlimited(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxResponseBytes(math.MaxInt64)))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.NotEmpty(t, res.ResourceID)
}

// The reconciler's schedule doubles up to maxInterval. With a valid but
// huge maxInterval the doubling overflowed to a negative interval and
// rand.N panicked, killing the process, once an operation had some forty
// attempts.
func TestReview2HugeReconcileMaxDoesNotPanic(t *testing.T) {
	e := newEnv(t, clientOpts(
		idem.WithReconcile(time.Hour, time.Duration(math.MaxInt64), 1000*time.Hour),
		idem.WithMaxAttempts(1)))
	_, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	now := e.clock.Now()
	_, err = e.store.Update(e.ctx, idem.DefaultScope, "k", func(r *journal.Record) error {
		for i := 1; i <= 100; i++ {
			r.Attempts = append(r.Attempts, journal.Attempt{Number: i, Kind: journal.AttemptQuery, Start: now, Done: true})
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k"}))
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Unknown)
	require.True(t, e.record("k").NextDue.After(e.clock.Now()))
}

// createHookStore runs onCreate after each Create commits.
type createHookStore struct {
	idem.Store
	onCreate func()
}

func (s *createHookStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	r, err := s.Store.Create(ctx, rec)
	if err == nil && s.onCreate != nil {
		s.onCreate()
	}
	return r, err
}

// Close/cancellation: "unknown, or pending if nothing can have been sent".
// A Submit stopped after its record (with attempt 1) was committed but
// before anything was sent left attempt 1 open: the operation was reported
// unknown, and the next start closed the attempt as "may have been sent",
// so a later legitimate refusal (a 400) could never settle it as failed.
func TestReview2SubmitStoppedBeforeSendingStaysPending(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	c, err := idem.New(&createHookStore{Store: e.store, onCreate: cancel}, e.baseOpts()...)
	require.NoError(t, err)
	res, err := c.Submit(ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, e.srv.Requests())
	require.Equal(t, idem.StatePending, res.State, "nothing was sent")
	rec := e.record("k")
	require.Equal(t, idem.StatePending, rec.State)
	for _, a := range rec.Attempts {
		require.True(t, a.Done, "an attempt never sent is left open: it will count as maybe sent")
		require.False(t, a.Wrote)
	}
	// The next start sends it without asking first, and a refusal settles it.
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "k"}))
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Failed)
	require.Zero(t, e.queries("k"))
}

// The result endpoint is "derived from the key". In a template whose
// {key} sits in the query string, a path-escaped key keeps '+', '&' and
// '=' (base64 keys have them): the server reads another key ('+' is a
// space there, '&' starts another parameter) and answers for the wrong
// operation, or 404 for ever.
func TestReview2ResultTemplateQueryEscapesKey(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithResultEndpoint("/operations?key={key}&v=1")))
	for _, key := range []string{"ab+cd/ef==", "a&key=b", "x?y#z"} {
		op, err := e.client.Prepare(e.ctx, e.req(key, `{}`))
		require.NoError(t, err)
		u, err := url.Parse(op.ResultURL)
		require.NoError(t, err)
		require.Equal(t, "/operations", u.Path)
		require.Equal(t, []string{key}, u.Query()["key"], op.ResultURL)
		require.Equal(t, "1", u.Query().Get("v"))
	}
	// A key in the path is still path-escaped.
	e2 := newEnv(t)
	op, err := e2.client.Prepare(e2.ctx, e2.req("ab+cd/ef==", `{}`))
	require.NoError(t, err)
	require.Equal(t, e2.srv.URL+"/operations/ab+cd%2Fef==", op.ResultURL)
}

// Close while a caller waits in coalesce for the call in flight, with a
// second Close and a Shutdown racing it: every call returns (unknown, never
// failed), every closer returns, and the next start settles the operation
// exactly once. (Passed as reviewed; kept for the lifecycle's sake.)
func TestReview2CloseWithJoinerAndConcurrentClosers(t *testing.T) {
	e, h := heldEnv(t)
	leader := submitAsync(e, "k")
	within(t, h.entered, "submit reaching the server")
	joiner := submitAsync(e, "k")
	waitJoined(t, 1)

	closers := make(chan error, 3)
	go func() { closers <- e.client.Close() }()
	go func() { closers <- e.client.Close() }()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		closers <- e.client.Shutdown(ctx)
	}()
	for _, ch := range []<-chan callResult{leader, joiner} {
		got := within(t, ch, "a call after Close")
		require.ErrorIs(t, got.err, idem.ErrUnknownOutcome)
		require.ErrorIs(t, got.err, idem.ErrClosed)
		require.NotNil(t, got.res)
		require.False(t, got.res.State.Terminal())
	}
	for range 3 {
		require.NoError(t, within(t, closers, "a closer"))
	}
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// updateHookStore runs onUpdate after each Update commits.
type updateHookStore struct {
	idem.Store
	onUpdate func()
}

func (s *updateHookStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	r, err := s.Store.Update(ctx, scope, key, fn)
	if err == nil && s.onUpdate != nil {
		s.onUpdate()
	}
	return r, err
}

// The other side of counting untraced errors as "maybe sent": a call
// stopped while its attempt was being journaled never reaches net/http, and
// must stay pending, not become unknown.
func TestReview2DoStoppedBeforeSendingStaysPending(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	c, err := idem.New(&updateHookStore{Store: e.store, onUpdate: cancel}, e.baseOpts()...)
	require.NoError(t, err)
	op, err := c.Prepare(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	res, err := c.Do(ctx, op)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Empty(t, e.srv.Requests())
	require.Equal(t, idem.StatePending, res.State)
	rec := e.record("k")
	require.Len(t, rec.Attempts, 1)
	require.True(t, rec.Attempts[0].Done)
	require.False(t, rec.Attempts[0].Wrote)
}
