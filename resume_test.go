package idem_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// sendRaw plays a request the crashed process sent before it died.
func (e *env) sendRaw(key, body string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/orders", bytes.NewReader([]byte(body)))
	require.NoError(e.t, err)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", scope)
	resp, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	require.NoError(e.t, resp.Body.Close())
}

// crashMidAttempt journals an attempt with no outcome, as a process killed
// between sending and recording the answer leaves it.
func (e *env) crashMidAttempt(key string) {
	e.t.Helper()
	now := e.clock.Now()
	_, err := e.store.Update(e.ctx, idem.DefaultScope, key, func(r *journal.Record) error {
		r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: now})
		r.FirstSent = now
		return nil
	})
	require.NoError(e.t, err)
}

func TestResume(t *testing.T) {
	tests := []struct {
		name        string
		serverSaw   bool // the crashed process's request reached the server
		midAttempt  bool // the journal holds an attempt without outcome
		wantSubmits int
		wantQueries int
	}{
		{name: "pending, never sent", wantSubmits: 1},
		{name: "attempt without outcome, server executed it", serverSaw: true, midAttempt: true, wantSubmits: 1, wantQueries: 1},
		{name: "attempt without outcome, server never got it", midAttempt: true, wantSubmits: 1, wantQueries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var settled []*idem.Result
			var mu sync.Mutex
			e := newEnv(t, clientOpts(idem.WithSettleFunc(func(r *idem.Result) {
				mu.Lock()
				settled = append(settled, r)
				mu.Unlock()
			})))
			const body = `{"amount":42}`
			_, err := e.client.Prepare(e.ctx, e.req("k", body))
			require.NoError(t, err)
			if tt.midAttempt {
				e.crashMidAttempt("k")
			}
			if tt.serverSaw {
				e.sendRaw("k", body)
			}
			e.restart()

			sum, err := e.client.Resume(e.ctx)
			require.NoError(t, err)
			require.Equal(t, idem.Summary{Visited: 1, Succeeded: 1}, sum)
			require.Len(t, e.submits("k"), tt.wantSubmits, "submits")
			require.Equal(t, tt.wantQueries, e.queries("k"), "queries")
			require.Equal(t, 1, e.srv.Effects(scope, "k"), "exactly one order")
			e.requireSameBytes("k")
			rec := e.record("k")
			require.Equal(t, idem.StateSucceeded, rec.State)
			for _, a := range rec.Attempts {
				require.True(t, a.Done, "attempt %d closed", a.Number)
			}
			mu.Lock()
			require.Len(t, settled, 1)
			require.Equal(t, "k", settled[0].Key)
			mu.Unlock()

			// Nothing open: a second Resume visits nothing and sends nothing.
			before := len(e.srv.Requests())
			sum, err = e.client.Resume(e.ctx)
			require.NoError(t, err)
			require.Zero(t, sum.Visited)
			require.Len(t, e.srv.Requests(), before)
		})
	}
}

func TestRunReconcilesHandedOffWork(t *testing.T) {
	settled, onSettle := settlements()
	e := newEnv(t, clientOpts(
		idem.WithMaxElapsed(5*time.Second),
		idem.WithReconcile(10*time.Second, time.Minute, 72*time.Hour),
		onSettle,
	))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", RetryAfter: 30 * time.Second}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	e.runUntilSettled(settled, "k", "the operation")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.Len(t, e.submits("k"), 2)
	require.Equal(t, idem.StateSucceeded, e.record("k").State)
}

// settlements is an option reporting each settlement on the channel it
// returns (one settlement buffered).
func settlements() (<-chan *idem.Result, idem.Option) {
	settled := make(chan *idem.Result, 1)
	return settled, idem.WithSettleFunc(func(r *idem.Result) { settled <- r })
}

// runUntilSettled runs Run until the first settlement on settled, which
// must be key's, succeeded, within 20 s (what names the operation for
// the failure), then stops Run and requires it returned for that.
func (e *env) runUntilSettled(settled <-chan *idem.Result, key, what string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.client.Run(ctx) }()
	select {
	case r := <-settled:
		require.Equal(e.t, key, r.Key)
		require.Equal(e.t, idem.StateSucceeded, r.State)
	case err := <-done:
		e.t.Fatalf("Run returned %v before settling", err)
	case <-time.After(20 * time.Second):
		e.t.Fatal("Run did not settle " + what)
	}
	cancel()
	require.ErrorIs(e.t, <-done, context.Canceled)
}

// The retry budget throttles foreground retries; the reconciler has its own
// schedule and must keep settling even when no new traffic refills the bucket.
func TestRunIgnoresEmptyRetryBudget(t *testing.T) {
	settled, onSettle := settlements()
	e := newEnv(t, clientOpts(
		idem.WithRetryBudget(2, 0.1),
		idem.WithReconcile(time.Second, time.Minute, 72*time.Hour),
		onSettle,
	))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.Unavailable, Key: "k", RetryAfter: time.Second}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrRetryBudgetEmpty)

	e.runUntilSettled(settled, "k", "the operation while the retry budget was empty")
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
}

func TestRunFlagsPastDeadline(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxAttempts(1), idem.WithRetryBudget(0, 0), idem.WithReconcile(time.Second, time.Minute, time.Hour)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "k", Count: 1000}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	e.clock.Advance(2 * time.Hour)

	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	ran := make(chan struct{})
	go func() { _ = e.client.Run(ctx); close(ran) }()
	require.Eventually(t, func() bool {
		op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
		return err == nil && op.Review == idem.ReviewDeadlinePassed
	}, 15*time.Second, time.Millisecond)
	cancel()
	<-ran // the restart below comes after this process's Run (and its lease) ended
	op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State, "flagged, still open, never failed")
	require.Zero(t, e.srv.Effects(scope, "k"))

	// A restart's Resume only asks about a flagged operation: resending is
	// a person's decision now, even inside the key window.
	submits, queries := len(e.submits("k")), e.queries("k")
	restarted, err := idem.New(e.replica(), append(e.baseOpts(), idem.WithMaxAttempts(5))...)
	require.NoError(t, err)
	sum, err := restarted.Resume(e.ctx)
	require.NoError(t, err)
	require.Equal(t, idem.Summary{Visited: 1, Review: 1}, sum)
	require.Len(t, e.submits("k"), submits, "Resume resent a flagged operation")
	require.Equal(t, queries+1, e.queries("k"))
}

func TestResolveByHand(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxAttempts(1)))
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k"}))
	_, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)

	_, err = e.client.Resolve(e.ctx, idem.DefaultScope, "k", idem.Resolution{State: idem.StateSucceeded})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	_, err = e.client.Resolve(e.ctx, idem.DefaultScope, "k", idem.Resolution{State: idem.StateUnknown, Reason: "x", By: "y"})
	require.ErrorIs(t, err, idem.ErrInvalidRequest)
	_, err = e.client.Resolve(e.ctx, idem.DefaultScope, "nope", idem.Resolution{State: idem.StateFailed, Reason: "x", By: "y"})
	require.ErrorIs(t, err, idem.ErrNotFound)
	// Bounded as a confirmation's are: a pasted log (3 MiB) is no reason,
	// and a resource id is an id.
	huge := strings.Repeat("x", 3<<20)
	for _, r := range []idem.Resolution{
		{State: idem.StateSucceeded, ResourceID: huge, Reason: "x", By: "y"},
		{State: idem.StateSucceeded, ResourceID: "ord_1", Reason: huge, By: "y"},
		{State: idem.StateSucceeded, ResourceID: "ord_1", Reason: "x", By: huge},
	} {
		_, err = e.client.Resolve(e.ctx, idem.DefaultScope, "k", r)
		require.ErrorIs(t, err, idem.ErrInvalidRequest)
		require.ErrorContains(t, err, "at most")
	}
	// A newline in By forges a line in the operator tool's history.
	for _, r := range []idem.Resolution{
		{State: idem.StateSucceeded, ResourceID: "ord_1\n", Reason: "x", By: "y"},
		{State: idem.StateSucceeded, ResourceID: "ord_1", Reason: "x", By: "alice\nresolved by: bob"},
		{State: idem.StateSucceeded, ResourceID: "ord_1", Reason: "\xff", By: "y"},
	} {
		_, err = e.client.Resolve(e.ctx, idem.DefaultScope, "k", r)
		require.ErrorIs(t, err, idem.ErrInvalidRequest)
		require.ErrorContains(t, err, "control characters")
	}
	require.Nil(t, e.record("k").Resolved, "nothing resolved")

	res, err := e.client.Resolve(e.ctx, idem.DefaultScope, "k", idem.Resolution{
		State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the provider dashboard", By: "alice"})
	require.NoError(t, err)
	require.True(t, res.Manual)
	rec := e.record("k")
	require.Equal(t, idem.StateSucceeded, rec.State)
	require.NotNil(t, rec.Resolved)
	require.Equal(t, "alice", rec.Resolved.By)
	require.Equal(t, idem.StateUnknown, rec.Resolved.From)

	before := len(e.srv.Requests())
	op, err := e.client.Lookup(e.ctx, idem.DefaultScope, "k")
	require.NoError(t, err)
	_, err = e.client.Do(e.ctx, op)
	require.NoError(t, err)
	require.Len(t, e.srv.Requests(), before, "terminal is final")
}

func TestPruneKeepsOpenAndRecent(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithMaxAttempts(1), idem.WithRetainSettled(48*time.Hour)))
	_, err := e.client.Submit(e.ctx, e.req("old", `{}`))
	require.NoError(t, err)
	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.ErrorBeforeCommit, Key: "open", Count: 100}))
	_, err = e.client.Submit(e.ctx, e.req("open", `{}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	e.clock.Advance(47 * time.Hour)
	_, err = e.client.Submit(e.ctx, e.req("recent", `{}`))
	require.NoError(t, err)

	n, err := e.client.Prune(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing settled 48 h ago yet")
	e.clock.Advance(2 * time.Hour)
	n, err = e.client.Prune(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = e.client.Lookup(e.ctx, idem.DefaultScope, "old")
	require.ErrorIs(t, err, idem.ErrNotFound)
	for _, k := range []string{"open", "recent"} {
		_, err = e.client.Lookup(e.ctx, idem.DefaultScope, k)
		require.NoError(t, err, k)
	}

	_, err = idem.New(e.replica(), idem.WithRetainSettled(idem.DefaultKeyRetention/2))
	require.ErrorContains(t, err, "shorter than the key window")
}

func TestJournalLockedByAnotherClient(t *testing.T) {
	e := newEnv(t)
	_, err := idem.Open(e.path, idem.WithJournalOptions(journal.WithLockTimeout(50*time.Millisecond)))
	require.ErrorIs(t, err, journal.ErrLocked)
	require.ErrorContains(t, err, e.path)
}

// Key retention: after a restart past the key window, an operation that
// may have been sent is only queried, never resent, and is flagged.
func TestResumePastKeyWindowNeverResends(t *testing.T) {
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
