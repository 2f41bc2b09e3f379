package idem_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// lostConfirmAnswer is a Store whose Confirm commits but reports
// journal.ErrMaybeCommitted, as a PostgreSQL journal does when the
// connection breaks after the COMMIT was sent (a restart, a failover),
// and whose next getFailures reads then fail as reads do while the
// database is coming back (connection refused). after is called once
// the confirmation is committed.
type lostConfirmAnswer struct {
	*journal.Store
	after func()

	mu          sync.Mutex
	getFailures int
	gets        int // reads after the confirmation
	cut         bool
}

func (s *lostConfirmAnswer) Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error) {
	rec, err := s.Store.Confirm(ctx, scope, key, c)
	s.mu.Lock()
	cut := !s.cut && err == nil
	s.cut = s.cut || cut
	s.mu.Unlock()
	if !cut {
		return rec, err
	}
	s.after()
	return nil, fmt.Errorf("pgjournal: confirm %q: %w: unexpected EOF", key, journal.ErrMaybeCommitted)
}

func (s *lostConfirmAnswer) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	s.mu.Lock()
	fail := false
	if s.cut {
		s.gets++
		fail = s.gets <= s.getFailures
	}
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("pgjournal: get %q: %w", key, syscall.ECONNREFUSED)
	}
	return s.Store.Get(ctx, scope, key)
}

// TestConfirmLostCommitAfterProviderHungUp: the provider stopped waiting
// for the webhook handler (Adyen gives an endpoint 10 s) while Confirm's
// write was under way, and that write's COMMIT took effect but its answer
// was lost as PostgreSQL failed over; the first reads back are refused
// while it comes back. The provider delivers the event again, which finds
// it recorded and changes nothing: the application must have been told
// of the settlement by the first delivery's Confirm, which reads back
// until the journal answers, whatever the handler's context says.
func TestConfirmLostCommitAfterProviderHungUp(t *testing.T) {
	counts, e := processingEnv(t)
	require.NoError(t, e.client.Close())
	handlerCtx, hangUp := context.WithCancel(e.ctx)
	defer hangUp()
	s := &lostConfirmAnswer{Store: e.store, after: hangUp, getFailures: 2}
	c, err := idem.New(s, e.baseOpts()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	sent := len(e.srv.Requests())

	event := webhookEvent(idem.StateSucceeded, "ord_000001", "evt_1")
	_, _ = c.Confirm(handlerCtx, "", "k", event) // nobody reads the answer: the provider hung up
	res, err := c.Confirm(e.ctx, "", "k", event)
	require.NoError(t, err, "Confirm() of the redelivered event")
	require.Equal(t, idem.StateSucceeded, res.State)

	op, err := c.Lookup(e.ctx, "", "k")
	require.NoError(t, err)
	require.Len(t, op.Confirmations, 1, "confirmations journaled")
	require.Equal(t, 1, counts.get(counts.hook, "k"), "settle hook calls")
	require.Equal(t, 1, counts.get(counts.fn, "k"), "settle func calls")
	require.Equal(t, sent, len(e.srv.Requests()), "requests after the confirmation")
}
