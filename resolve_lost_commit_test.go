package idem_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// lostResolveAnswer is a Store whose first Resolve commits but reports
// journal.ErrMaybeCommitted, as a PostgreSQL journal does when the
// connection breaks after the COMMIT was sent (a failover), and the bbolt
// journal when the disk fails the write's last step.
type lostResolveAnswer struct {
	*journal.Store
	lost lostOnce
}

func (s *lostResolveAnswer) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	rec, err := s.Store.Resolve(ctx, scope, key, m)
	if !s.lost.first(err) {
		return rec, err
	}
	return nil, fmt.Errorf("pgjournal: resolve %q: %w: unexpected EOF", key, journal.ErrMaybeCommitted)
}

// lostOnce picks the first write that succeeded, whose answer is lost.
type lostOnce struct {
	mu   sync.Mutex
	done bool
}

func (l *lostOnce) first(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || err != nil {
		return false
	}
	l.done = true
	return true
}

// A person resolves an order handed off unknown (ErrUnknownOutcome) and
// the resolution's commit takes effect, its answer lost. Resolve failed,
// so the application's settle func was not told; the operator's retry
// (the admin handler's, OnlyOpen) is refused as settled already, and a
// forced one is a correction of a settled operation, not reported
// either: the order was charged and never shipped. Resolve now reads the
// operation back, as Confirm does, and finding its own resolution goes on
// as if the commit had answered.
func TestResolveLostCommitReachesTheSettleFunc(t *testing.T) {
	e, c, reports, sent := unknownOrder(t, func(s *journal.Store) idem.Store { return &lostResolveAnswer{Store: s} })

	resolution := idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "alice", OnlyOpen: true}
	res, resolveErr := c.Resolve(e.ctx, "", "k", resolution)
	requireResolvedReportedOnce(t, e, c, reports, sent, res, resolveErr)
}

// requireResolvedReportedOnce holds what a Resolve whose commit took
// effect (res, err) must leave: the operator's retry (OnlyOpen, as the
// admin handler makes it) refused as settled already, one order, no
// request sent since sent, and the settle func told once.
func requireResolvedReportedOnce(t *testing.T, e *env, c *idem.Client, reports *settleFuncReports, sent int, res *idem.Result, resolveErr error) {
	t.Helper()
	_, err := c.Resolve(e.ctx, "", "k", idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "alice", OnlyOpen: true})
	require.ErrorIs(t, err, journal.ErrTerminal, "the retry")

	require.Equal(t, idem.StateSucceeded, e.record("k").State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders after the resolution")
	require.Len(t, e.srv.Requests(), sent, "requests sent after the resolution")
	reported := reports.results()
	require.Len(t, reported, 1, "WithSettleFunc told of the resolution whose commit's answer was lost")
	require.Equal(t, "ord_000001", reported[0].ResourceID)
	require.NoError(t, resolveErr, "Resolve whose commit took effect")
	require.Equal(t, idem.StateSucceeded, res.State)
}

// unknownOrder is an order handed off unknown (ErrUnknownOutcome): every
// answer of an API without a result endpoint lost, on a Client over the
// Store wrap makes of e's journal. It returns the Client, what its settle
// func is told and the requests sent so far.
func unknownOrder(t *testing.T, wrap func(*journal.Store) idem.Store, opts ...idem.Option) (*env, *idem.Client, *settleFuncReports, int) {
	t.Helper()
	reports := &settleFuncReports{}
	e := newEnv(t, noResultEndpoint(), clientOpts(reports.option()))
	require.NoError(t, e.client.Close())
	c, err := idem.New(wrap(e.store), append(e.baseOpts(), opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k", Count: 1000}))
	_, err = c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "every answer lost")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders before the resolution")
	return e, c, reports, len(e.srv.Requests())
}

// expiringCtx is a caller's context with a deadline that the test ends
// when it chooses (expire), with context.DeadlineExceeded, as an admin
// handler's behind a timeout middleware ends.
type expiringCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiringCtx(parent context.Context) *expiringCtx {
	return &expiringCtx{Context: parent, done: make(chan struct{})}
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *expiringCtx) expire() { c.once.Do(func() { close(c.done) }) }

// deadlineAfterCommit is a Store whose first Resolve commits, and then the
// caller's deadline passes before the COMMIT's answer arrives: as
// pgjournal's cutError does, its error then matches both
// journal.ErrMaybeCommitted and the context's context.DeadlineExceeded.
// A context that the caller's deadline does not end gets the answer.
type deadlineAfterCommit struct {
	*journal.Store
	caller *expiringCtx
	lost   lostOnce
}

func (s *deadlineAfterCommit) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	rec, err := s.Store.Resolve(ctx, scope, key, m)
	if !s.lost.first(err) {
		return rec, err
	}
	s.caller.expire()
	if ctx.Err() == nil {
		return rec, nil
	}
	return nil, fmt.Errorf("pgjournal: resolve %q: the call's context ended (%w) before the database answered, after the write's COMMIT was sent: %w",
		key, ctx.Err(), journal.ErrMaybeCommitted)
}

// An admin handler behind a timeout middleware resolves an order handed
// off unknown; its deadline passes after the COMMIT was sent, which takes
// effect. Resolve passed the caller's context to the journal, whose error
// then read as the journal's own timeout (storeStalled), so no read-back:
// Resolve failed, the retry was refused as settled already, the settle
// func never told. The journal write now runs on, as Confirm's does,
// bounded by the Store's own call timeout only.
func TestResolveCallerDeadlineAfterCommitReachesTheSettleFunc(t *testing.T) {
	var store *deadlineAfterCommit
	e, c, reports, sent := unknownOrder(t, func(s *journal.Store) idem.Store {
		store = &deadlineAfterCommit{Store: s}
		return store
	})
	ctx := newExpiringCtx(e.ctx)
	store.caller = ctx

	resolution := idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "alice", OnlyOpen: true}
	res, resolveErr := c.Resolve(ctx, "", "k", resolution)
	requireResolvedReportedOnce(t, e, c, reports, sent, res, resolveErr)
}

// twinWinsCommit is a Store whose first Resolve loses its COMMIT to an
// operator's double-submit of the same resolution (twin, the other POST
// /resolve, which passed the open check too): the twin commits and
// reports, and this one answers journal.ErrMaybeCommitted having written
// nothing, as a PostgreSQL journal does when the connection breaks before
// the COMMIT reached the database.
type twinWinsCommit struct {
	*journal.Store
	twin func()
	ran  atomic.Bool
}

func (s *twinWinsCommit) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	if s.twin == nil || s.ran.Swap(true) {
		return s.Store.Resolve(ctx, scope, key, m)
	}
	s.twin()
	return nil, fmt.Errorf("pgjournal: resolve %q: %w: unexpected EOF", key, journal.ErrMaybeCommitted)
}

// An operator double-submits a resolution: both calls read the same clock
// (a manual one here; a coarse wall clock does it too), so the same At,
// By, Reason and state. The first's commit was lost, the second committed
// and reported; the first read the second's resolution back as its own
// and reported it again. Each of a Client's resolutions now has its own
// time, later than the one before. The twin is forced: an unforced one is
// refused while the first holds the operation (holdForResolve), as a
// second replica's, on its own Client, is not.
func TestResolveLostCommitDoesNotReportTheTwinsResolution(t *testing.T) {
	var store *twinWinsCommit
	e, c, reports, sent := unknownOrder(t, func(s *journal.Store) idem.Store {
		store = &twinWinsCommit{Store: s}
		return store
	})
	resolution := idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "alice", OnlyOpen: true}
	var twinErr error
	forced := resolution
	forced.Force = true
	store.twin = func() { _, twinErr = c.Resolve(e.ctx, "", "k", forced) }

	_, err := c.Resolve(e.ctx, "", "k", resolution)
	require.Len(t, reports.results(), 1, "WithSettleFunc told once, by the twin that committed")
	require.ErrorIs(t, err, journal.ErrMaybeCommitted, "the call whose commit was lost")
	require.NoError(t, twinErr, "the twin, which committed")

	require.Equal(t, idem.StateSucceeded, e.record("k").State)
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders after the resolution")
	require.Len(t, e.srv.Requests(), sent, "requests sent after the resolution")
}
