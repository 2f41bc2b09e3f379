package idem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// stalledClaimStore, armed, holds every Claim until release is closed or
// the claim's context ends, as the bbolt journal's Claim waits for the
// commit round under way (a stuck fsync) and pgjournal's for a row lock
// another transaction holds; one that ends first takes nothing.
type stalledClaimStore struct {
	*journal.Store
	armed   atomic.Bool
	panics  atomic.Bool
	release chan struct{}
}

func (s *stalledClaimStore) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	if s.panics.CompareAndSwap(true, false) {
		panic("claim: the Store's own bug")
	}
	if s.armed.Load() {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, journal.Lease{}, fmt.Errorf("journal: claim: %w", ctx.Err())
		}
	}
	return s.Store.Claim(ctx, scope, key, owner, now, expires)
}

// let ends the stall, once.
func (s *stalledClaimStore) let() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// chargeServer answers every charge 201 and counts them.
func chargeServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"ch_%d","status":"succeeded"}`, n)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// newStalledClaimClient opens a Client on a stalledClaimStore (disarmed)
// and a charge server, and prepares a charge under key "k".
func newStalledClaimClient(t *testing.T) (*idem.Client, *stalledClaimStore, *idem.Operation, *atomic.Int32) {
	srv, hits := chargeServer(t)
	js, err := journal.Open(t.TempDir() + "/idem.journal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &stalledClaimStore{Store: js, release: make(chan struct{})}
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// Before Close (cleanups run last first), which waits for a Resolve
	// still held, should a check fail while it is.
	t.Cleanup(store.let)
	op, err := c.Prepare(context.Background(), idem.Request{Key: "k", URL: srv.URL + "/charges", Body: []byte(`{"amount":100}`)})
	require.NoError(t, err)
	return c, store, op, hits
}

// requireUnresolved asserts the journal holds "k" open, unresolved.
func requireUnresolved(t *testing.T, store *stalledClaimStore) {
	t.Helper()
	rec, err := store.Store.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.True(t, rec.Open(), "state %s: nothing written", rec.State)
	require.Nil(t, rec.Resolved)
}

// resolveWithin runs Resolve under a deadline of d and waits for it no
// longer than wait.
func resolveWithin(t *testing.T, c *idem.Client, key string, r idem.Resolution, d, wait time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := c.Resolve(ctx, "", key, r)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		t.Fatalf("Resolve under a %v deadline still running after %v", d, wait)
		return nil
	}
}

// driveAfter drives op and asserts it charged once and settled.
func driveAfter(t *testing.T, c *idem.Client, op *idem.Operation, hits *atomic.Int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Do(ctx, op)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.EqualValues(t, 1, hits.Load(), "charges")
}

// An operator resolves a payment "failed" while the journal's claim
// stalls (bbolt behind a stuck fsync, pgjournal behind a row lock): the
// claim ran past the caller's context, so Resolve (and the admin
// handler's, its curl long gone) did not return until the stall ended,
// holding the key meanwhile, and then wrote the resolution nobody was
// waiting for. The claim now ends with the caller's deadline, nothing
// written, and the key is free: a Do of it charges once and settles.
func TestResolveClaimStalledEndsAtTheCallersDeadline(t *testing.T) {
	c, store, op, hits := newStalledClaimClient(t)

	store.armed.Store(true)
	start := time.Now()
	err := resolveWithin(t, c, "k", idem.Resolution{State: idem.StateFailed, Reason: "not in the dashboard", By: "alice"},
		100*time.Millisecond, 5*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "nothing was written")
	require.Less(t, time.Since(start), 3*time.Second, "Resolve past its 100 ms deadline")
	requireUnresolved(t, store)
	require.Zero(t, hits.Load(), "charges before the Do")

	store.armed.Store(false)
	store.let()
	driveAfter(t, c, op, hits)
}

// A Store whose Claim panics (its own bug) left Resolve's hold on the
// key: the panic reached the caller, and every later Do of the key
// joined a hold nobody would end. The hold now goes with the panic.
func TestResolveClaimPanicLeavesNoHold(t *testing.T) {
	c, store, op, hits := newStalledClaimClient(t)

	store.panics.Store(true)
	require.Panics(t, func() {
		_, _ = c.Resolve(context.Background(), "", "k", idem.Resolution{State: idem.StateFailed, Reason: "not in the dashboard", By: "alice"})
	})
	requireUnresolved(t, store)
	driveAfter(t, c, op, hits)
}
