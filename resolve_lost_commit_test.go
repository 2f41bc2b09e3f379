package idem_test

import (
	"context"
	"fmt"
	"sync"
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
	var reports settleFuncReports
	e := newEnv(t, noResultEndpoint(), clientOpts(reports.option()))
	require.NoError(t, e.client.Close())
	c, err := idem.New(&lostResolveAnswer{Store: e.store}, e.baseOpts()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	require.NoError(t, e.srv.Inject(idemtest.Fault{Kind: idemtest.DropAfterCommit, Key: "k", Count: 1000}))
	_, err = c.Submit(e.ctx, e.req("k", `{"n":1}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "every answer lost")
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "orders before the resolution")
	sent := len(e.srv.Requests())

	resolution := idem.Resolution{State: idem.StateSucceeded, ResourceID: "ord_000001", Reason: "seen in the dashboard", By: "alice", OnlyOpen: true}
	res, resolveErr := c.Resolve(e.ctx, "", "k", resolution)
	// The operator's retry, as the admin handler makes it.
	_, err = c.Resolve(e.ctx, "", "k", resolution)
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
