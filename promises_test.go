package idem_test

// Tests for promises and outcome-table rows of DESIGN.md that no other test
// could fail on: each was written after a deliberate mutation of the code it
// protects survived the existing suite.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// wireCheck is a transport that, as each submit goes on the wire, reads the
// journal and checks what is already committed there: the operation with
// the exact bytes, URL, headers and key being sent, and an attempt for this
// very send with no outcome yet (promises 1, 2 and 3).
type wireCheck struct {
	base http.RoundTripper
	e    *env // read at each request: a restart replaces e.store

	mu       sync.Mutex
	problems []string
	submits  int
}

func (w *wireCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		w.check(req)
	}
	return w.base.RoundTrip(req)
}

func (w *wireCheck) check(req *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.submits++
	fail := func(format string, args ...any) {
		w.problems = append(w.problems, fmt.Sprintf("submit %d: ", w.submits)+fmt.Sprintf(format, args...))
	}
	var body []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			fail("GetBody: %v", err)
			return
		}
		body, _ = io.ReadAll(rc)
	}
	key := req.Header.Get("Idempotency-Key")
	rec, err := w.e.store.Get(context.Background(), idem.DefaultScope, key)
	if err != nil {
		fail("sent before its operation was journaled: %v", err)
		return
	}
	if !bytes.Equal(rec.Body, body) {
		fail("body %q, journaled %q", body, rec.Body)
	}
	if req.Method != rec.Method || req.URL.String() != rec.URL {
		fail("%s %s, journaled %s %s", req.Method, req.URL, rec.Method, rec.URL)
	}
	for name, vals := range rec.Header {
		if got := req.Header.Values(name); !equalStrings(got, vals) {
			fail("header %s %q, journaled %q", name, got, vals)
		}
	}
	var submits []journal.Attempt
	for _, a := range rec.Attempts {
		if a.Kind == journal.AttemptSubmit {
			submits = append(submits, a)
		}
	}
	if len(submits) == 0 {
		fail("no submit attempt journaled before sending")
		return
	}
	if last := submits[len(submits)-1]; last.Done {
		fail("the latest journaled submit (attempt %d) already has an outcome: this send was not journaled first", last.Number)
	}
	if rec.FirstSent.IsZero() {
		fail("FirstSent not journaled before the first send")
	}
}

func (w *wireCheck) result() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.submits, append([]string(nil), w.problems...)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wireCheckedEnv(t *testing.T, opts ...envOption) (*env, *wireCheck) {
	w := &wireCheck{}
	e := newEnv(t, append([]envOption{clientOpts(idem.WithHTTPClient(&http.Client{Transport: w}))}, opts...)...)
	w.base, w.e = e.srv.Client().Transport, e
	return e, w
}

// Promises 1, 2 and 3: every submit, first or retry, in the first process
// or after a restart, goes out only once the operation and an open attempt
// for it are committed, and carries the journaled key, bytes, URL and
// headers.
func TestPromiseJournalBeforeWire(t *testing.T) {
	e, w := wireCheckedEnv(t)
	req := e.req("k", `{"amount":12}`)
	req.URL += "?api-version=2"
	req.Header = http.Header{"X-Request-Source": {"checkout"}, "Content-Type": {"application/json"}}

	// Submit: 503, then a 500 before commit (query 404, resend), then 201.
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k"}))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k"}))
	res, err := e.client.Submit(e.ctx, req)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	n, problems := w.result()
	require.Equal(t, 3, n, "submits sent")
	require.Empty(t, problems)
	require.Len(t, e.submits("k"), 3)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))

	// Prepare, a crash mid-attempt, a restart: Resume asks, then resends.
	req2 := e.req("k2", `{"amount":13}`)
	req2.URL, req2.Header = req.URL, req.Header
	_, err = e.client.Prepare(e.ctx, req2)
	require.NoError(t, err)
	e.crashMidAttempt("k2")
	e.restart()
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
	n, problems = w.result()
	require.Equal(t, 4, n, "submits sent")
	require.Empty(t, problems)
	require.Equal(t, 1, e.queries("k2"), "asked before resending")
}

// errDiskFull is what a journal that cannot write returns.
var errDiskFull = &journalTestErr{"disk full"}

type journalTestErr struct{ s string }

func (e *journalTestErr) Error() string { return e.s }

// failAfterSend fails every journal write once a submit has gone out: the
// answer arrives, but its outcome cannot be committed.
type failAfterSend struct {
	idem.Store
	sent *atomic.Bool
}

func (s *failAfterSend) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	if s.sent.Load() {
		return nil, errDiskFull
	}
	return s.Store.Update(ctx, scope, key, fn)
}

// Promise 8: the caller sees an outcome only after it is committed. The
// server performs the order and answers 201, but the journal refuses the
// write: the caller must not be told "succeeded" (nor "failed").
func TestPromiseOutcomeOnlyAfterCommit(t *testing.T) {
	e := newEnv(t)
	var sent atomic.Bool
	base := e.srv.Client().Transport
	hc := &http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			sent.Store(true)
		}
		return base.RoundTrip(r)
	})}
	c, err := idem.New(&failAfterSend{Store: e.store, sent: &sent}, append(e.baseOpts(), idem.WithHTTPClient(hc))...)
	require.NoError(t, err)

	res, err := c.Submit(e.ctx, e.req("k", `{"amount":5}`))
	require.Error(t, err)
	require.ErrorIs(t, err, errDiskFull)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotNil(t, res)
	require.False(t, res.State.Terminal(), "the caller was told %s, which the journal does not hold", res.State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.True(t, e.record("k").Open())

	// With a working journal the next start settles it, without a duplicate.
	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded)
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// Outcome table, "other 4xx": failed with the server's reason, as the
// server gave it, to the caller and in the journal.
func TestRowRejectedKeepsServerReason(t *testing.T) {
	t.Run("402 declined", func(t *testing.T) {
		e := newEnv(t)
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Decline, Key: "k"}))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Contains(t, res.Reason, "card declined")
		require.ErrorContains(t, err, "card declined")
		require.Contains(t, e.record("k").Result.Reason, "card declined")
	})
	t.Run("403 with a message", func(t *testing.T) {
		e := newEnv(t, script(step{status: http.StatusForbidden, body: `{"message":"merchant account frozen"}`}))
		res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.StateFailed, res.State)
		require.Contains(t, res.Reason, "merchant account frozen")
		require.Equal(t, http.StatusForbidden, e.record("k").Result.StatusCode)
	})
}

// Outcome table, 422: failed with ErrKeyConflict, also when asked again
// later, and never resent.
func TestRowKeyConflictStaysAConflict(t *testing.T) {
	e := newEnv(t, script(step{status: http.StatusUnprocessableEntity, body: `{"error":"Idempotency-Key reused with a different payload"}`}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrKeyConflict)
	require.ErrorIs(t, err, idem.ErrFailed, "a settled conflict is a failure too")
	op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
	require.NoError(t, err)
	before := len(e.srv.Requests())
	res, err := e.client.Do(e.ctx, op)
	require.ErrorIs(t, err, idem.ErrKeyConflict, "a settled conflict reported as another failure")
	require.Equal(t, idem.StateFailed, res.State)
	require.Len(t, e.srv.Requests(), before)
	require.Equal(t, 1, e.script.posts, "resent after a 422")
}

// Loop step 4: a failing result query (5xx, garbage, a dropped connection)
// is still "unknown", never an outcome; later the operation settles with
// the same key and no duplicate.
func TestQueryFailureIsStillUnknown(t *testing.T) {
	for _, kind := range []idemtest.FaultKind{idemtest.ErrorBeforeCommit, idemtest.GarbageBody, idemtest.TruncatedBody, idemtest.DropAfterCommit} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t, clientOpts(idem.WithMaxAttempts(2)))
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
			require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: kind, Key: "k", Query: true}))
			res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
			require.ErrorIs(t, err, idem.ErrUnknownOutcome)
			require.NotErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateUnknown, res.State)
			require.Equal(t, idem.StateUnknown, e.record("k").State)
			require.Len(t, e.submits("k"), 1)
			require.Equal(t, 1, e.queries("k"))

			op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
			require.NoError(t, err)
			res, err = e.client.Do(e.ctx, op)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Len(t, e.submits("k"), 1, "the query found it: no resend")
			require.Equal(t, 1, e.srv.Effects(scope, "k"))
		})
	}
}

// Promise 3: after a crash, an attempt with no recorded outcome makes the
// operation unknown, never failed. Here the crashed request did reach the
// server; the result endpoint lags (404), and the resend meets a 403 from
// an auth layer. That refusal says nothing about the crashed attempt.
func TestPromiseCrashedAttemptIsNeverFailed(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxAttempts(3)), script(step{status: http.StatusForbidden}))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.QueryLag, Key: "k", Delay: time.Hour}))
	_, err := e.client.Prepare(e.ctx, e.req("k", `{"amount":9}`))
	require.NoError(t, err)
	e.crashMidAttempt("k")
	e.sendRaw("k", `{"amount":9}`)
	e.restart()

	sum, err := e.client.Resume(e.ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Failed, "summary %+v", sum)
	require.Equal(t, 1, sum.Unknown, "summary %+v", sum)
	rec := e.record("k")
	require.Equal(t, idem.StateUnknown, rec.State)
	require.Equal(t, 1, e.script.posts, "the resend happened (and met the 403)")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

// Key retention: the window runs from the first send. An operation never
// sent has no key on the server to forget: past the window it is sent, not
// flagged "key expired".
func TestKeyWindowStartsAtFirstSend(t *testing.T) {
	t.Run("prepared", func(t *testing.T) {
		e := newEnv(t)
		op, err := e.client.Prepare(e.ctx, e.req("k", `{}`))
		require.NoError(t, err)
		e.clock.Advance(idem.DefaultKeyRetention + time.Hour)
		res, err := e.client.Do(e.ctx, op)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Empty(t, res.Review)
		require.Equal(t, 1, e.srv.Effects(scope, "k"))
	})
	t.Run("submit stopped before sending", func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(e.ctx)
		c, err := idem.New(&createHookStore{Store: e.store, onCreate: cancel}, e.baseOpts()...)
		require.NoError(t, err)
		res, err := c.Submit(ctx, e.req("k", `{}`))
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, idem.StatePending, res.State)
		require.Empty(t, e.srv.Requests())

		// Past the window, the first real send meets a 500 (nothing
		// recorded): the query says 404, and the key, sent a moment ago,
		// is well inside its window: resend, do not flag.
		e.clock.Advance(idem.DefaultKeyRetention + time.Hour)
		require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k"}))
		sum, err := e.client.Resume(e.ctx)
		require.NoError(t, err)
		require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum, "a never-sent operation flagged instead of sent")
		require.Len(t, e.submits("k"), 2)
		require.Equal(t, 1, e.queries("k"))
		require.Equal(t, 1, e.srv.Effects(scope, "k"))
		require.Empty(t, e.record("k").Review)
	})
}

// Resume and reconciliation: the background reconciler settles operations
// left processing (not only unknown ones) and reports each settlement to
// the callback, without resending.
func TestRunSettlesProcessing(t *testing.T) {
	settled, onSettle := settlements()
	e := newEnv(t, clientOpts(
		idem.WithMaxElapsed(5*time.Second),
		idem.WithReconcile(10*time.Second, time.Minute, 72*time.Hour),
		onSettle,
	))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.SlowProcessing, Key: "k", Delay: 10 * time.Minute}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StateProcessing, res.State)
	require.Equal(t, idem.StateProcessing, e.record("k").State)

	e.runUntilSettled(settled, "k", "the processing operation")
	require.Len(t, e.submits("k"), 1, "a processing operation is only queried")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.Equal(t, idem.StateSucceeded, e.record("k").State)
}
