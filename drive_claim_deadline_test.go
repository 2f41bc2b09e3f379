package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// claimOnlyStore is a Store without CreateClaimed (a Store of an older
// release, or one of a user's own): Submit journals its record, then
// claims it as Do does.
type claimOnlyStore struct{ idem.Store }

// callWithin runs call under a deadline of d and waits for it no longer
// than wait.
func callWithin(t *testing.T, d, wait time.Duration, call func(ctx context.Context) (*idem.Result, error)) (*idem.Result, error) {
	t.Helper()
	type out struct {
		res *idem.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		res, err := call(ctx)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(wait):
		t.Fatalf("call under a %v deadline still running after %v", d, wait)
		return nil, nil
	}
}

// requireUnknownAtDeadline asserts what a caller cut by its 100 ms deadline
// during the claim is told: unknown, for key "k", which is still open and
// was never sent.
func requireUnknownAtDeadline(t *testing.T, start time.Time, res *idem.Result, err error, store *stalledClaimStore, hits *atomic.Int32) {
	t.Helper()
	require.Less(t, time.Since(start), 3*time.Second, "the call past its 100 ms deadline")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "journaled: never \"failed\" nor \"nothing journaled\"")
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotNil(t, res)
	require.Equal(t, "k", res.Key)
	require.False(t, res.State.Terminal(), "state %s", res.State)
	requireUnresolved(t, store)
	require.Zero(t, hits.Load(), "charges while the claim stalled")
}

// A Do whose journal's claim stalls (bbolt behind a stuck fsync,
// pgjournal behind a row lock until its call timeout) ran the claim past
// the caller's context: a Do under a 100 ms deadline returned only when
// the stall ended, seconds or minutes later, and every other Do of the
// key joined it meanwhile. It now ends at the caller's deadline, told
// the operation is unknown, nothing sent; once the stall ends a Do
// charges once and settles.
func TestDoClaimStalledEndsAtTheCallersDeadline(t *testing.T) {
	c, store, op, hits := newStalledClaimClient(t)

	store.armed.Store(true)
	start := time.Now()
	res, err := callWithin(t, 100*time.Millisecond, 5*time.Second, func(ctx context.Context) (*idem.Result, error) {
		return c.Do(ctx, op)
	})
	requireUnknownAtDeadline(t, start, res, err, store, hits)

	store.armed.Store(false)
	store.let()
	driveAfter(t, c, op, hits)
}

// Submit on a Store without CreateClaimed journals the operation, then
// claims it: a claim stalled there held Submit past its deadline too. It
// now ends at the deadline with the operation journaled, so the caller is
// told unknown with the key (promise 13), never failed; a later Do of
// the key charges once and settles.
func TestSubmitClaimStalledEndsAtTheCallersDeadline(t *testing.T) {
	srv, hits := chargeServer(t)
	js, err := journal.Open(t.TempDir() + "/idem.journal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &stalledClaimStore{Store: js, release: make(chan struct{})}
	c, err := idem.New(claimOnlyStore{store}, idem.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(store.let)

	store.armed.Store(true)
	start := time.Now()
	res, err := callWithin(t, 100*time.Millisecond, 5*time.Second, func(ctx context.Context) (*idem.Result, error) {
		return c.Submit(ctx, idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(`{"amount":100}`)})
	})
	requireUnknownAtDeadline(t, start, res, err, store, hits)

	store.armed.Store(false)
	store.let()
	op, err := c.Lookup(context.Background(), "", "k")
	require.NoError(t, err)
	driveAfter(t, c, op, hits)
}

// Resume at start-up under a deadline (an orchestrator's readiness
// bound) met the stalled claim too, and ran past the deadline until the
// stall ended. It now returns at its deadline with the operation open and
// unsent; a Resume once the stall ends charges once and settles it.
func TestResumeClaimStalledEndsAtTheCallersDeadline(t *testing.T) {
	c, store, _, hits := newStalledClaimClient(t)

	store.armed.Store(true)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Resume(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("Resume under a 100ms deadline still running after 5s")
	}
	require.Less(t, time.Since(start), 3*time.Second, "Resume past its 100 ms deadline")
	requireUnresolved(t, store)
	require.Zero(t, hits.Load(), "charges while the claim stalled")

	store.armed.Store(false)
	store.let()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sum, err := c.Resume(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Succeeded, "%+v", sum)
	require.EqualValues(t, 1, hits.Load(), "charges")
}

// unreadableClaimStore is a stalledClaimStore whose reads fail too once
// armed: a database that stopped answering (pgjournal past its read's
// bound, a connection reset) after the operation was journaled.
type unreadableClaimStore struct {
	*stalledClaimStore
	unreadable atomic.Bool
}

func (s *unreadableClaimStore) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	if s.unreadable.Load() {
		return nil, errors.New("journal: get: read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return s.stalledClaimStore.Get(ctx, scope, key)
}

// A Submit of a key already journaled (the caller's retry) whose claim
// its deadline cut, and whose read of the record then failed, returned
// a plain error: by Submit's contract "nothing was journaled and nothing
// will be sent", while Run sends the journaled charge; a caller that
// trusted it and ordered again under a new key paid twice. The record
// Submit found is journaled: it is now told unknown with the key, and a
// Do of the key charges once.
func TestSubmitOfAJournaledKeyCutInItsClaimWithTheReadFailingSaysUnknown(t *testing.T) {
	srv, hits := chargeServer(t)
	js, err := journal.Open(t.TempDir() + "/idem.journal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &unreadableClaimStore{stalledClaimStore: &stalledClaimStore{Store: js, release: make(chan struct{})}}
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(store.let)
	req := idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(`{"amount":100}`)}
	op, err := c.Prepare(context.Background(), req)
	require.NoError(t, err)

	store.armed.Store(true)
	store.unreadable.Store(true)
	start := time.Now()
	res, err := callWithin(t, 100*time.Millisecond, 5*time.Second, func(ctx context.Context) (*idem.Result, error) {
		return c.Submit(ctx, req)
	})
	requireUnknownAtDeadline(t, start, res, err, store.stalledClaimStore, hits)

	store.armed.Store(false)
	store.unreadable.Store(false)
	store.let()
	driveAfter(t, c, op, hits)
}
