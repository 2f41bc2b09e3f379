package pgjournal_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestMaybeJournaledRetryWhileServerDown: a Submit with no key (idem makes
// one up) whose create PostgreSQL commits as the server goes down, its
// answer lost, is ErrUnknownOutcome with the key. The caller retries that
// key while the server is still down: the retry's create fails before
// anything is sent, and it too is ErrUnknownOutcome, not "nothing was
// journaled", which the errors' contract reads as nothing will be sent:
// a caller that then placed the order anew under a new key once the
// server was back got two orders, the second Submit's and the first's,
// which Resume found committed and sent. Retrying the key once the server
// is back carries out the one operation, once.
func TestMaybeJournaledRetryWhileServerDown(t *testing.T) {
	ctx := context.Background()
	cutter := &commitCutter{committed: make(chan bool, 1)}
	d := &serverDown{}
	cutter.onCut = func() { d.down.Store(true) }
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		d.dial(pc, func(conn net.Conn) net.Conn { return &cutterConn{Conn: conn, c: cutter} })
	})
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := newClient(t, s, srv)

	req := idem.Request{URL: srv.URL + "/orders", Body: []byte(`{"amount":4711}`)}
	cutter.arm(`{"amount":4711}`, afterCommit)
	_, err = c.Submit(ctx, req)
	require.True(t, cutter.wait(t), "the server committed the first create")
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose create's answer was lost")
	var ie *idem.Error
	require.ErrorAs(t, err, &ie)
	first := ie.Key

	// The caller as the errors' docs tell it, in at most three more
	// calls: the server comes back after the first of them.
	req.Key = first
	var errs []error
	for range 3 {
		_, err = c.Submit(ctx, req)
		d.down.Store(false)
		errs = append(errs, err)
		if err == nil {
			break
		}
		if !errors.Is(err, idem.ErrUnknownOutcome) {
			t.Logf("Submit() of key %s: %v: taken as nothing journaled, placed anew", req.Key, err)
			req.Key = "" // nothing journaled, nothing will be sent
		}
	}
	require.NoError(t, err, "the caller's last Submit()")

	// Later, what is open is resumed (by this Client: the lease the
	// first create took is its own).
	_, err = c.Resume(ctx)
	require.NoError(t, err, "Resume()")

	orders := 0
	seen := map[string]bool{}
	for _, r := range srv.Requests() {
		if r.Method == "POST" && !seen[r.Key] {
			seen[r.Key] = true
			orders += srv.Effects("", r.Key)
		}
	}
	require.Equal(t, 1, orders, "orders at the server for one intent")
	ops, err := c.List(ctx, idem.Filter{})
	require.NoError(t, err)
	require.Len(t, ops, 1, "operations journaled for one intent")
	require.Equal(t, first, ops[0].Key)
	require.Equal(t, idem.StateSucceeded, ops[0].State)
	require.Equal(t, 1, submits(srv, first), "submits of the first key")
	require.ErrorIs(t, errs[0], idem.ErrUnknownOutcome, "the retry made while the server was down")
	require.ErrorIs(t, errs[0], journal.ErrMaybeCommitted, "the retry made while the server was down")
	require.ErrorContains(t, errs[0], "never a new one")
}
