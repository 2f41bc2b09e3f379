package idem_test

import (
	"context"
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
	"github.com/idemkit/idem/journal"
)

// ---- helpers for the review tests ----

// gateTransport holds every submit (non-GET) until release is closed, so a
// test can start a second caller while the first has a request in flight.
// A held request gives up when its context ends, without being sent.
type gateTransport struct {
	base    http.RoundTripper
	entered chan struct{} // receives once per held submit
	release chan struct{}
}

func newGate() *gateTransport {
	return &gateTransport{entered: make(chan struct{}, 16), release: make(chan struct{})}
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
	case <-time.After(10 * time.Second):
		t.Fatal("no submit reached the transport")
	}
}

// waitJoined polls the goroutine dump until n callers wait in coalesce for
// a call in flight (blocked in its select, not driving themselves).
func waitJoined(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<22)
	for time.Now().Before(deadline) {
		dump := string(buf[:runtime.Stack(buf, true)])
		joined := 0
		for _, g := range strings.Split(dump, "\n\n") {
			if strings.Contains(g, "idem.(*Client).coalesce(") && !strings.Contains(g, "idem.(*Client).drive(") &&
				strings.Contains(strings.SplitN(g, "\n", 2)[0], "select") {
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

// sleepHookClock is the env's manual clock, with fn run (once) at the
// first Sleep: something that happens while the caller waits.
type sleepHookClock struct {
	*idemtest.Clock
	once sync.Once
	fn   func()
}

func (c *sleepHookClock) Sleep(ctx context.Context, d time.Duration) error {
	c.once.Do(c.fn)
	return c.Clock.Sleep(ctx, d)
}

// failingStore wraps a Store and fails every Update once broken is set.
type failingStore struct {
	idem.Store
	mu     sync.Mutex
	broken bool
}

var errDiskFull = &journalTestErr{"disk full"}

type journalTestErr struct{ s string }

func (e *journalTestErr) Error() string { return e.s }

func (s *failingStore) breakWrites() { s.mu.Lock(); s.broken = true; s.mu.Unlock() }

func (s *failingStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	if broken {
		return nil, errDiskFull
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// ---- regression tests that pass on the current code ----

// Outcome table: 3xx, 1xx (101) and out-of-range status codes may follow
// an executed create. Redirects are never followed (a redirected POST loses
// its body); the answer is ambiguous, so the result endpoint is asked and
// nothing is executed twice.
func TestReviewOddStatusCodesAreAmbiguous(t *testing.T) {
	for _, status := range []int{http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusSwitchingProtocols, 599, 999} {
		t.Run(http.StatusText(status)+"_"+strconv.Itoa(status), func(t *testing.T) {
			e := newEnv(t, script(step{forward: true, status: status, header: http.Header{"Location": {"/elsewhere"}}}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":1}`))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Len(t, e.submits("k"), 1)
			require.Equal(t, 1, e.queries("k"))
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
			for _, r := range e.srv.Requests() {
				require.NotEqual(t, "/elsewhere", r.Path, "redirect followed")
			}
		})
	}
}

// Waits: a hostile Retry-After (absurd delta-seconds, a date decades away)
// never parks a caller beyond the cap, and garbage is ignored.
func TestReviewHostileRetryAfterIsCapped(t *testing.T) {
	for _, ra := range []string{"99999999999999999999999", "Fri, 01 Jan 2100 00:00:00 GMT", "-5", "1e9", strings.Repeat("9", 200)} {
		t.Run(ra[:min(len(ra), 20)], func(t *testing.T) {
			e := newEnv(t, clientOpts(idem.WithMaxElapsed(time.Hour)),
				script(step{status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {ra}}}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			for _, s := range e.clock.Sleeps() {
				require.LessOrEqual(t, s, idem.DefaultRetryAfterCap)
			}
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
		})
	}
}

// Promise 5: after succeeded/failed, zero requests for the key, whoever
// asks: Submit again, Do, Resume.
func TestReviewTerminalIsFinalForEveryEntryPoint(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "d"}))
	_, err := e.client.Submit(e.ctx, e.req("s", `{}`))
	require.NoError(t, err)
	_, err = e.client.Submit(e.ctx, e.req("d", `{}`))
	require.ErrorIs(t, err, idem.ErrFailed)
	before := len(e.srv.Requests())

	for _, k := range []string{"s", "d"} {
		_, _ = e.client.Submit(e.ctx, e.req(k, `{}`))
		op, err := e.client.Lookup(e.ctx, idem.DefaultScope, k)
		require.NoError(t, err)
		_, _ = e.client.Do(e.ctx, op)
	}
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Visited)
	require.Len(t, e.srv.Requests(), before, "a request went out for a settled key")
}

// Key retention: after a restart past the key window, an operation that
// may have been sent is only queried, never resent, and is flagged.
func TestReviewResumePastKeyWindowNeverResends(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: "k", Delay: 100 * 24 * time.Hour}))
	_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":7}`))
	require.NoError(t, err)
	e.crashMidAttempt("k")
	e.sendRaw("k", `{"amount":7}`) // the crashed process's request arrived
	e.clock.Advance(idem.DefaultKeyRetention + time.Second)
	e.restart()

	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Review)
	require.Len(t, e.submits("k"), 1, "resent past the key window")
	rec := e.record("k")
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, idem.ReviewKeyExpired, rec.Review)
}

// Concurrency: Resume and Do for the same operations at once never put two
// requests in flight for one key, and every order executes exactly once.
func TestReviewResumeConcurrentWithDo(t *testing.T) {
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

// Close while a call is in flight (Open owns the journal): the call returns
// without hanging and without claiming an outcome it could not journal;
// after a restart the operation is still open and settles exactly once.
func TestReviewCloseWhileInFlight(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	g := newGate()
	g.base = srv.Client().Transport
	path := t.TempDir() + "/j"
	hook := idem.WithRequestHook(func(r *http.Request) error { r.Header.Set("Authorization", scope); return nil })
	c, err := idem.Open(path, idem.WithHTTPClient(&http.Client{Transport: g}), hook,
		idem.WithResultEndpoint(srv.URL+"/operations/{key}"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(context.Background(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{}`)})
		done <- err
	}()
	waitEntered(t, g)
	require.NoError(t, c.Close())
	close(g.release)
	select {
	case err := <-done:
		require.Error(t, err, "an outcome was reported that the closed journal could not hold")
		require.NotErrorIs(t, err, idem.ErrFailed)
	case <-time.After(10 * time.Second):
		t.Fatal("Submit hung after Close")
	}
	_, err = c.Submit(context.Background(), idem.Request{Key: "k2", URL: srv.URL + "/orders"})
	require.ErrorIs(t, err, idem.ErrClosed)

	c2, err := idem.Open(path, idem.WithHTTPClient(srv.Client()), hook, idem.WithResultEndpoint(srv.URL+"/operations/{key}"))
	require.NoError(t, err)
	defer c2.Close()
	op, err := c2.Lookup(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.False(t, op.State.Terminal())
	sum, err := c2.Resume(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded)
	require.Equal(t, 1, srv.Effects(scope, "k"))
}

// Cancellation: a caller joined to a call in flight that stops waiting
// gets the journaled state (never failed), and the call it left goes on.
func TestReviewJoinedCallerCancelled(t *testing.T) {
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
