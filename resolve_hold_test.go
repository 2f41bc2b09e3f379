package idem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// heldClaimStore holds the first Claim once armed, before it reaches the
// journal, until release is closed: a Resolve's claim in its round trip
// (a loaded disk's fsync, a remote Store's network).
type heldClaimStore struct {
	*journal.Store
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

// let ends the hold, once.
func (s *heldClaimStore) let() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *heldClaimStore) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.reached)
		<-s.release
	}
	return s.Store.Claim(ctx, scope, key, owner, now, expires)
}

// unsentServer answers 500 to anything: the tests here send nothing, a
// request reaching it fails them through the count.
func unsentServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// An operator double-clicks "failed" while replica-b drives the payment
// under its live lease and replica-a's first Resolve is still claiming:
// the second Resolve found the first's hold and wrote "failed" with no
// lease check at all, under b's lease; b's request on the wire then
// charges and the customer, told "failed", pays again: 2 charges. The
// second is now refused at once, nothing written; the first is refused
// by b's lease.
func TestResolveDoubleSubmitIsRefusedWhileTheFirstClaims(t *testing.T) {
	srv, hits := unsentServer(t)
	js, err := journal.Open(t.TempDir() + "/idem.journal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &heldClaimStore{Store: js, reached: make(chan struct{}), release: make(chan struct{})}
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithLease("replica-a", idem.DefaultLeaseDuration))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// Before Close (cleanups run last first), which waits for the held
	// Resolve, should a check fail while it is held.
	t.Cleanup(store.let)
	ctx := context.Background()
	_, err = c.Prepare(ctx, idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	now := time.Now()
	_, _, err = js.Claim(ctx, idem.DefaultScope, "k", "replica-b", now, now.Add(time.Hour))
	require.NoError(t, err)

	failed := idem.Resolution{State: idem.StateFailed, Reason: "not in the dashboard", By: "alice"}
	store.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := c.Resolve(ctx, "", "k", failed)
		first <- err
	}()
	select {
	case <-store.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Resolve did not claim")
	}
	_, err = c.Resolve(ctx, "", "k", failed)
	require.ErrorIs(t, err, journal.ErrLeased, "the second Resolve, while the first claims")
	require.Contains(t, err.Error(), "another resolution")
	rec, gerr := js.Get(ctx, idem.DefaultScope, "k")
	require.NoError(t, gerr)
	require.True(t, rec.Open(), "state %s under replica-b's live lease", rec.State)

	store.let()
	select {
	case err = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Resolve did not end")
	}
	require.ErrorIs(t, err, journal.ErrLeased)
	require.Contains(t, err.Error(), "replica-b")
	rec, gerr = js.Get(ctx, idem.DefaultScope, "k")
	require.NoError(t, gerr)
	require.True(t, rec.Open(), "state %s: nothing written", rec.State)
	require.Nil(t, rec.Resolved)
	require.Zero(t, hits.Load(), "requests sent")
}

// A settle func that drives the same key again (an application
// re-submitting what it was told failed, or reading it through Do) joined
// Resolve's hold, which Resolve let go only after the settle func
// returned: Do waited until its own deadline (2 s, "context deadline
// exceeded"). Resolve now lets go before it tells anyone.
func TestSettleFuncCallingDoAfterResolveDoesNotWaitForIt(t *testing.T) {
	srv, hits := unsentServer(t)
	js, err := journal.Open(t.TempDir() + "/idem.journal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	var c *idem.Client
	var op *idem.Operation
	type told struct {
		res *idem.Result
		err error
	}
	got := make(chan told, 1)
	c, err = idem.New(js, idem.WithHTTPClient(srv.Client()), idem.WithSettleFunc(func(r *idem.Result) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := c.Do(ctx, op)
		got <- told{res, err}
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	op, err = c.Prepare(ctx, idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)

	res, err := c.Resolve(ctx, "", "k", idem.Resolution{State: idem.StateFailed, Reason: "cancelled by the customer", By: "alice"})
	require.NoError(t, err)
	require.Equal(t, idem.StateFailed, res.State)
	select {
	case g := <-got:
		require.False(t, errors.Is(g.err, context.DeadlineExceeded), "Do in the settle func waited for Resolve: %v", g.err)
		require.NotNil(t, g.res, "Do in the settle func: %v", g.err)
		require.Equal(t, idem.StateFailed, g.res.State)
	case <-time.After(10 * time.Second):
		t.Fatal("the settle func was not called")
	}
	require.Zero(t, hits.Load(), "requests sent")
}
