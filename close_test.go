package idem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// holdTransport forwards every submit to the server, so the server performs
// it, then holds the answer until release is closed or the request's
// context ends: a response in flight at the moment of a Close.
type holdTransport struct {
	base    http.RoundTripper
	entered chan struct{}
	release chan struct{}
	held    atomic.Int32
}

func (h *holdTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	if err != nil || req.Method == http.MethodGet {
		return resp, err
	}
	h.held.Add(1)
	h.entered <- struct{}{}
	select {
	case <-h.release:
		return resp, nil
	case <-req.Context().Done():
		_ = resp.Body.Close()
		return nil, req.Context().Err()
	}
}

func heldEnv(t *testing.T) (*env, *holdTransport) {
	h := &holdTransport{entered: make(chan struct{}, 16), release: make(chan struct{})}
	e := newEnv(t, clientOpts(idem.WithHTTPClient(&http.Client{Transport: h})))
	h.base = e.srv.Client().Transport
	return e, h
}

// within fails the test unless ch yields within a generous bound.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting after a minute", what)
		panic("unreachable")
	}
}

type callResult struct {
	res *idem.Result
	err error
}

func submitAsync(e *env, key string) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		res, err := e.client.Submit(context.Background(), e.req(key, `{"amount":1}`))
		out <- callResult{res, err}
	}()
	return out
}

// Close while the server has performed a submit and its answer is in
// flight: the call returns at once as unknown, never failed, the journal
// says unknown, and the next start settles it with no second side effect.
func TestCloseStopsCallInFlightAndResumeSettlesIt(t *testing.T) {
	e, h := heldEnv(t)
	done := submitAsync(e, "close-1")
	within(t, h.entered, "submit reaching the server")

	closed := make(chan error, 1)
	go func() { closed <- e.client.Close() }()
	require.NoError(t, within(t, closed, "Close"))
	got := within(t, done, "Submit after Close")

	require.ErrorIs(t, got.err, idem.ErrClosed)
	require.ErrorIs(t, got.err, idem.ErrUnknownOutcome)
	require.NotNil(t, got.res)
	require.Equal(t, idem.StateUnknown, got.res.State)
	require.Equal(t, journal.StateUnknown, e.record("close-1").State)
	require.Equal(t, 1, e.srv.Effects(scope, "close-1"))

	// Refused after Close, and nothing journaled for it.
	_, err := e.client.Submit(context.Background(), e.req("close-2", `{"amount":2}`))
	require.ErrorIs(t, err, idem.ErrClosed)
	_, err = e.store.Get(context.Background(), idem.DefaultScope, "close-2")
	require.ErrorIs(t, err, journal.ErrNotFound)
	require.NoError(t, e.client.Close(), "a second Close")

	e.restart()
	sum, err := e.client.Resume(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded)
	require.Equal(t, journal.StateSucceeded, e.record("close-1").State)
	require.Equal(t, 1, e.srv.Effects(scope, "close-1"), "Resume must query, not resend")
	require.Len(t, e.submits("close-1"), 1)
	require.EqualValues(t, 1, h.held.Load())
}

// Shutdown refuses new calls at once but lets the call in flight finish.
func TestShutdownLetsCallsInFlightFinish(t *testing.T) {
	e, h := heldEnv(t)
	done := submitAsync(e, "shut-1")
	within(t, h.entered, "submit reaching the server")

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shut <- e.client.Shutdown(ctx)
	}()

	// Shutdown has begun once new calls are refused.
	refused := make(chan struct{})
	go func() {
		defer close(refused)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if _, err := e.client.Lookup(context.Background(), idem.DefaultScope, "shut-1"); errors.Is(err, idem.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	within(t, refused, "calls refused during Shutdown")
	_, err := e.client.Submit(context.Background(), e.req("shut-2", `{"amount":2}`))
	require.ErrorIs(t, err, idem.ErrClosed)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a call was in flight", err)
	case got := <-done:
		t.Fatalf("the call in flight ended (%v) before its answer was released", got.err)
	default:
	}

	close(h.release)
	got := within(t, done, "Submit")
	require.NoError(t, got.err)
	require.Equal(t, idem.StateSucceeded, got.res.State)
	require.NoError(t, within(t, shut, "Shutdown"))
	require.Equal(t, journal.StateSucceeded, e.record("shut-1").State)
	require.Equal(t, 1, e.srv.Effects(scope, "shut-1"))
}

// When Shutdown's context ends first, the calls still in flight are
// stopped as by Close, and Shutdown says so.
func TestShutdownDeadlineStopsCalls(t *testing.T) {
	e, h := heldEnv(t)
	done := submitAsync(e, "late-1")
	within(t, h.entered, "submit reaching the server")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := e.client.Shutdown(ctx)
	require.ErrorIs(t, err, context.Canceled)

	got := within(t, done, "Submit")
	require.ErrorIs(t, got.err, idem.ErrClosed)
	require.ErrorIs(t, got.err, idem.ErrUnknownOutcome)
	require.Equal(t, journal.StateUnknown, e.record("late-1").State)
}

// Run is background work: Close stops it without waiting for ctx, and
// returns only after it has.
func TestCloseStopsRun(t *testing.T) {
	settled := make(chan *idem.Result, 1)
	e := newEnv(t, clientOpts(idem.WithSettleFunc(func(r *idem.Result) { settled <- r })))
	// Prepared and never driven: Run sends it once it is due, which shows
	// that Run is active.
	_, err := e.client.Prepare(context.Background(), e.req("run-1", `{"amount":1}`))
	require.NoError(t, err)

	ran := make(chan error, 1)
	go func() { ran <- e.client.Run(context.Background()) }()
	require.Equal(t, "run-1", within(t, settled, "Run settling a due operation").Key)

	closed := make(chan error, 1)
	go func() { closed <- e.client.Close() }()
	require.NoError(t, within(t, closed, "Close with Run active"))
	// Run has left the Client when Close returns, but the goroutine sends
	// its result a moment later: a select with default here was a race
	// (about one run in four failed). Run is still bounded by within.
	require.ErrorIs(t, within(t, ran, "Run after Close"), idem.ErrClosed)
	require.Equal(t, 1, e.srv.Effects(scope, "run-1"))
}

// A Client from Open owns its journal: Close closes it (the file can be
// opened again), and a second Close or Shutdown is harmless.
func TestCloseReleasesOwnedJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "owned.journal")
	c, err := idem.Open(path)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	require.NoError(t, c.Shutdown(context.Background()))
	_, err = c.Prepare(context.Background(), idem.Request{URL: "http://127.0.0.1:1/orders", Body: []byte(`{}`)})
	require.ErrorIs(t, err, idem.ErrClosed)

	s, err := journal.Open(path, journal.WithLockTimeout(time.Second))
	require.NoError(t, err, "the journal must be unlocked after Close")
	require.NoError(t, s.Close())
}

// failingCreateStore commits the record, then reports the commit failed:
// the worst case of a failed fsync, where the caller cannot know.
type failingCreateStore struct {
	idem.Store
	err error
}

func (s *failingCreateStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	if _, err := s.Store.Create(ctx, rec); err != nil {
		return nil, err
	}
	return nil, s.err
}

// A failed journal write names the key, so the caller retries with it;
// retrying with it then drives the operation that did reach the disk,
// once.
func TestSubmitJournalErrorNamesTheKey(t *testing.T) {
	e := newEnv(t)
	fsyncErr := errors.New("fdatasync: input/output error")
	c, err := idem.New(&failingCreateStore{Store: e.store, err: fsyncErr}, e.baseOpts()...)
	require.NoError(t, err)
	req := e.req("", `{"amount":5}`) // a key idem makes up
	_, err = c.Submit(e.ctx, req)
	require.ErrorIs(t, err, fsyncErr)
	ops, lerr := e.client.List(e.ctx, idem.Filter{})
	require.NoError(t, lerr)
	require.Len(t, ops, 1, "the record reached the disk")
	key := ops[0].Key
	require.Contains(t, err.Error(), `key "`+key+`"`)
	require.Contains(t, err.Error(), "reuse this key")
	require.Zero(t, len(e.submits(key)), "nothing sent")

	req.Key = key
	res, err := e.client.Submit(e.ctx, req)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, e.srv.Effects(scope, key))
}

// TestShutdownUnderLoadLosesNothing stops a busy client half-way through a
// faulty workload with a short grace period, then restarts and resumes:
// whatever was journaled settles exactly once, and whatever Shutdown
// refused was neither journaled nor sent.
func TestShutdownUnderLoadLosesNothing(t *testing.T) {
	const n, retention = 400, 1000 * time.Hour
	e := newEnv(t,
		serverOpts(idemtest.WithSeed(11), idemtest.WithRetention(retention), idemtest.WithProfile(idemtest.Profile{
			Rates: map[idemtest.FaultKind]float64{
				idemtest.DropAfterCommit:   0.05,
				idemtest.ErrorAfterCommit:  0.05,
				idemtest.ErrorBeforeCommit: 0.05,
				idemtest.Unavailable:       0.03,
				idemtest.QueryLag:          0.05,
				idemtest.SlowProcessing:    0.05,
				idemtest.DelayResponse:     0.05, // held 3 s, real time: in flight at the Shutdown
				idemtest.Decline:           0.02,
			},
			Delay:      3 * time.Second,
			RetryAfter: time.Second,
		})),
		clientOpts(idem.WithKeyRetention(retention), idem.WithAttemptTimeout(10*time.Second), idem.WithRetryBudget(0, 0)),
	)

	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("load-%04d", i)
	}
	var returned atomic.Int32
	half := make(chan struct{})
	var halfOnce sync.Once
	var refused sync.Map     // keys Submit refused with ErrClosed before journaling
	var stopped atomic.Int32 // calls Shutdown stopped mid-way
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, err := e.client.Submit(context.Background(), e.req(keys[i], fmt.Sprintf(`{"order":%d}`, i)))
				if res == nil && errors.Is(err, idem.ErrClosed) {
					refused.Store(keys[i], true)
				}
				if res != nil && errors.Is(err, idem.ErrClosed) {
					stopped.Add(1)
					if res.State.Terminal() || !errors.Is(err, idem.ErrUnknownOutcome) {
						t.Errorf("%s: stopped by Shutdown, left %s (%v)", keys[i], res.State, err)
					}
				}
				if returned.Add(1) == n/4 {
					halfOnce.Do(func() { close(half) })
				}
			}
		}()
	}
	go func() {
		for i := range keys {
			jobs <- i
		}
		close(jobs)
	}()

	within(t, half, "a quarter of the workload")
	grace, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.client.Shutdown(grace); err != nil {
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	wg.Wait()

	// What Shutdown refused was never journaled, and the server never saw it.
	nRefused := 0
	refused.Range(func(k, _ any) bool {
		nRefused++
		_, err := e.store.Get(context.Background(), idem.DefaultScope, k.(string))
		require.ErrorIs(t, err, journal.ErrNotFound, "%s refused but journaled", k)
		require.Empty(t, e.submits(k.(string)), "%s refused but sent", k)
		return true
	})
	require.Positive(t, nRefused, "Shutdown came too late to refuse anything")
	require.Positive(t, stopped.Load(), "no call was in flight at the Shutdown (the delay fault holds some for 3 s)")

	// A restart with the faults gone settles the rest.
	e.settleByRestarts()
	stats := e.srv.Stats()
	require.LessOrEqual(t, stats.MaxEffectsPerKey, 1, "max_effects_per_key")
	succeeded := 0
	for _, k := range keys {
		if _, ok := refused.Load(k); ok {
			continue
		}
		rec := e.record(k) // not refused: journaled, so it must be here
		switch rec.State {
		case idem.StateSucceeded:
			succeeded++
			require.Equalf(t, 1, e.srv.Effects(scope, k), "%s succeeded: side effects", k)
		case idem.StateFailed:
			require.Zerof(t, e.srv.Effects(scope, k), "%s failed: side effects", k)
		default:
			t.Fatalf("%s left %s after the restarts (review %q)", k, rec.State, rec.Review)
		}
	}
	require.Equal(t, stats.SideEffects, succeeded, "no side effect outside a succeeded operation")
	t.Logf("refused %d of %d, stopped %d; server %+v", nRefused, n, stopped.Load(), stats)
}

// Close while a call is in flight (Open owns the journal): the call returns
// without hanging and without claiming an outcome it could not journal;
// after a restart the operation is still open and settles exactly once.
func TestCloseWhileInFlight(t *testing.T) {
	srv := newServer(t)
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
	case <-time.After(time.Minute):
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

// Close while a caller waits in coalesce for the call in flight, with a
// second Close and a Shutdown racing it: every call returns (unknown, never
// failed), every closer returns, and the next start settles the operation
// exactly once.
func TestCloseWithJoinerAndConcurrentClosers(t *testing.T) {
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

// Shutdown: "Calls in flight (Do, Submit) carry on until they settle". A
// Submit that joined a Resume visit for the same key got the visit's
// ErrClosed when Shutdown drained the background work, and was stopped
// with ErrUnknownOutcome although its own context and Shutdown's were alive.
func TestShutdownLetsForegroundJoinerOfResumeFinish(t *testing.T) {
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

// Shutdown "returns ctx's error if it had to stop calls". With no call in
// flight it had nothing to stop, yet a done ctx made it return an error
// half of the time (select between two ready cases).
func TestShutdownIdleReportsNothingStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 40 {
		e := newEnv(t)
		require.NoError(t, e.client.Shutdown(ctx))
	}
}

// Run's contract: "Run returns ctx.Err() when ctx ends, ErrClosed when the
// Client is closed, or an error if the journal fails". On Close, a visit
// already handed to a worker read the journal with the drained context and
// Run reported "idem: journal: context canceled", a broken journal, and
// its visits went on starting after its context ended.
func TestRunReturnsErrClosedNotJournalError(t *testing.T) {
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

// closeDuringCreateStore starts Close while Submit's Create is about to
// run, and lets Create go on only once Close has stopped the call.
type closeDuringCreateStore struct {
	idem.Store
	client func() *idem.Client
	closed chan error
}

func (s *closeDuringCreateStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	go func() { s.closed <- s.client().Close() }()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return s.Store.Create(ctx, rec)
}

// Close: "calls in flight ... return errors matching ErrClosed". A Submit
// that Close stopped just before its record was written got the journal's
// "context canceled", which matches neither ErrClosed nor anything else a
// caller can tell apart from a caller's own cancellation.
func TestSubmitStoppedByCloseBeforeJournalingSaysClosed(t *testing.T) {
	e := newEnv(t)
	var c *idem.Client
	st := &closeDuringCreateStore{Store: e.store, client: func() *idem.Client { return c }, closed: make(chan error, 1)}
	c, err := idem.New(st, e.baseOpts()...)
	require.NoError(t, err)
	_, err = c.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrClosed)
	require.Contains(t, err.Error(), `key "k"`, "still names the key to retry with")
	require.NoError(t, within(t, st.closed, "Close"))
	require.Empty(t, e.srv.Requests())
}

// drainDuringScanStore starts Shutdown while Resume scans the journal.
type drainDuringScanStore struct {
	idem.Store
	client func() *idem.Client
	closed chan error
}

func (s *drainDuringScanStore) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.closed <- s.client().Shutdown(ctx)
	}()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	return s.Store.ForEachOpen(ctx, fn)
}

// Resume is drained by Shutdown and says so with ErrClosed (as Run does,
// and as its visits do); drained during its scan of the journal it
// reported "idem: resume: context canceled" instead.
func TestResumeDrainedDuringScanSaysClosed(t *testing.T) {
	e := newEnv(t)
	var c *idem.Client
	st := &drainDuringScanStore{Store: e.store, client: func() *idem.Client { return c }, closed: make(chan error, 1)}
	c, err := idem.New(st, e.baseOpts()...)
	require.NoError(t, err)
	_, err = c.Resume(e.ctx)
	require.ErrorIs(t, err, idem.ErrClosed)
	require.NoError(t, within(t, st.closed, "Shutdown"))
}
