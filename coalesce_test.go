package idem_test

// Callers with the same key in one process share one call in flight: the
// second joins the first instead of sending. These tests check that a
// joined caller still gets an answer that is its own: about its own request
// (the same body, or a key conflict), on its own context and budget, never
// the leader's cancellation, panic or hand-off.

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// gateTransport holds every submit (non-GET) until release is closed, so a
// test can start a second caller while the first has a request in flight.
// A held request gives up when its context ends, without being sent.
type gateTransport struct {
	base    http.RoundTripper
	entered chan struct{} // receives once per held submit
	release chan struct{}
}

func (g *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-req.Context().Done():
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, req.Context().Err()
		}
	}
	return g.base.RoundTrip(req)
}

func newGate() *gateTransport {
	return &gateTransport{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

// gatedEnv is newEnv with every submit going through a gate.
func gatedEnv(t *testing.T, opts ...envOption) (*env, *gateTransport) {
	g := newGate()
	e := newEnv(t, append([]envOption{clientOpts(idem.WithHTTPClient(&http.Client{Transport: g}))}, opts...)...)
	g.base = e.srv.Client().Transport
	return e, g
}

func waitEntered(t *testing.T, g *gateTransport) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(time.Minute):
		t.Fatal("no submit reached the transport")
	}
}

// waitJoined polls the goroutine dump until n callers wait in coalesce for
// a call in flight: blocked in joinOrRun's select, the innermost frame of
// package idem. (A leader blocked in a select further in, a transport's,
// is not one: Resume's leader has no drive frame to tell it by.)
func waitJoined(t *testing.T, n int) {
	t.Helper()
	const pkg = "github.com/idemkit/idem."
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<22)
	for time.Now().Before(deadline) {
		dump := string(buf[:runtime.Stack(buf, true)])
		joined := 0
		for _, g := range strings.Split(dump, "\n\n") {
			header, frames, _ := strings.Cut(g, "\n")
			if i := strings.Index(frames, pkg); i >= 0 && strings.Contains(header, "select") &&
				strings.HasPrefix(frames[i+len(pkg):], "(*Client).joinOrRun(") {
				joined++
			}
		}
		if joined >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("fewer than %d callers joined the call in flight", n)
}

// Contract: "Preparing the same (scope, key) again ... with a different
// request returns ErrKeyConflict", and a resubmission is only the same
// operation if it is the same request. A second Submit with the same key but
// a different body, arriving while the first is in flight, must not be told
// that *its* request succeeded: it was joined to the first call without any
// comparison and received the first request's result.
func TestJoinedSubmitWithDifferentBodyIsConflict(t *testing.T) {
	e, g := gatedEnv(t)
	first := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{"amount":100}`))
		first <- err
	}()
	waitEntered(t, g)

	second := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{"amount":999999}`))
		second <- err
	}()
	waitJoined(t, 1)
	close(g.release)

	require.NoError(t, <-first)
	err := <-second
	require.ErrorIs(t, err, idem.ErrKeyConflict,
		"a different body under the same key was reported as succeeded (got %v)", err)
}

// Cancellation: a caller joined to a call in flight that stops waiting
// gets the journaled state (never failed), and the call it left goes on.
func TestJoinedCallerCancelled(t *testing.T) {
	e, g := gatedEnv(t)
	first := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		first <- err
	}()
	waitEntered(t, g)
	ctx, cancel := context.WithCancel(e.ctx)
	second := make(chan error, 1)
	var res2 *idem.Result
	go func() {
		var err error
		res2, err = e.client.Submit(ctx, e.req("k", `{}`))
		second <- err
	}()
	waitJoined(t, 1)
	cancel()
	err := <-second
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, res2)
	require.False(t, res2.State.Terminal())
	close(g.release)
	require.NoError(t, <-first)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// "Two callers in one process with the same key never have two requests in
// flight: the second joins the first." Joining must not import the first
// caller's cancellation: the second caller's context is alive and its
// budget untouched, yet it was handed context.Canceled and an unknown
// outcome because somebody else gave up.
func TestJoinedCallerNotCancelledByLeader(t *testing.T) {
	e, g := gatedEnv(t)
	lctx, cancel := context.WithCancel(e.ctx)
	first := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(lctx, e.req("k", `{}`))
		first <- err
	}()
	waitEntered(t, g)
	second := make(chan error, 1)
	go func() {
		_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		second <- err
	}()
	waitJoined(t, 1)
	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
	close(g.release) // later submits pass
	err := <-second
	require.NotErrorIs(t, err, context.Canceled, "the joined caller inherited another caller's cancellation")
}

// Joining must not import the leader's cancellation, whatever its cause:
// a leader cancelled with context.WithCancelCause ended the joined caller
// too (only context.Canceled and DeadlineExceeded were recognised).
func TestJoinerIgnoresLeaderCancelCause(t *testing.T) {
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

// Contract: Do/Submit return a non-nil Result, or an error, for every call;
// a (nil, nil) answer reads as success. When the caller driving a key panics
// (a user Decoder, Classifier, hook or transport; net/http's server
// recovers handler panics, so the process lives on), callers joined to it
// got (nil, nil).
func TestJoinedCallerAfterLeaderPanic(t *testing.T) {
	calls := 0
	e, g := gatedEnv(t, clientOpts(idem.WithDecoder(func(a *idem.Answer) (idem.Outcome, error) {
		calls++
		if calls == 1 {
			panic("decoder bug")
		}
		return idem.DecodeJSON(a)
	})))
	first := make(chan any, 1)
	go func() {
		defer func() { first <- recover() }()
		_, _ = e.client.Submit(e.ctx, e.req("k", `{}`))
	}()
	waitEntered(t, g)
	type out struct {
		res *idem.Result
		err error
	}
	second := make(chan out, 1)
	go func() {
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		second <- out{res, err}
	}()
	waitJoined(t, 1)
	close(g.release)
	require.NotNil(t, <-first, "the leader panicked")
	o := <-second
	require.False(t, o.res == nil && o.err == nil, "joined caller got (nil, nil): reads as success")
}

// Do "drives a journaled operation until it settles or the call's budget
// is spent". A Do that joined the reconciler's visit (which never waits:
// one 503 and it reschedules) returned the reconciler's ErrBudgetSpent
// after one exchange, with its own budget untouched.
func TestForegroundJoinerOfReconcilerKeepsItsBudget(t *testing.T) {
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
	done := doJoined(t, e, "k")
	close(g.release)
	got := within(t, done, "Do")
	stop()
	within(t, ran, "Run")
	require.NoError(t, got.err, "Do returned the reconciler's hand-off")
	require.Equal(t, idem.StateSucceeded, got.res.State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// doJoined starts Do for key, which a call in flight drives, and returns
// once Do has joined that call; Do's result arrives on the channel.
func doJoined(t *testing.T, e *env, key string) <-chan callResult {
	t.Helper()
	op, err := e.client.Lookup(e.ctx, idem.DefaultScope, key)
	require.NoError(t, err)
	done := make(chan callResult, 1)
	go func() {
		res, err := e.client.Do(e.ctx, op)
		done <- callResult{res, err}
	}()
	waitJoined(t, 1)
	return done
}

// Concurrency: Resume and Do for the same operations at once never put two
// requests in flight for one key, and every order executes exactly once.
func TestResumeConcurrentWithDo(t *testing.T) {
	e := newEnv(t)
	const n = 24
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i+1)
		_, err := e.client.Prepare(e.ctx, e.req(keys[i], `{"n":`+strconv.Itoa(i+1)+`}`))
		require.NoError(t, err)
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DelayResponse, Key: keys[i], Delay: 20 * time.Millisecond}))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := e.client.Resume(e.ctx)
		assert.NoError(t, err)
	}()
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op, err := e.client.Lookup(e.ctx, idem.DefaultScope, k)
			if !assert.NoError(t, err) {
				return
			}
			res, err := e.client.Do(e.ctx, op)
			if assert.NoError(t, err) {
				assert.Equal(t, idem.StateSucceeded, res.State)
			}
		}()
	}
	wg.Wait()
	for _, k := range keys {
		require.Equal(t, 1, e.srv.Effects(scope, k), k)
		require.Len(t, e.submits(k), 1, k)
		e.requireSameBytes(k)
	}
}
