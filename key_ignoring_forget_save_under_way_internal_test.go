package idem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// slowKeyIgnoringSave is a journal whose AddKeyIgnoring waits to be
// released: a custom Store on a database slow to commit (modelled).
type slowKeyIgnoringSave struct {
	*journal.Store
	entered chan string   // the endpoint of the first AddKeyIgnoring
	release chan struct{} // closed: AddKeyIgnoring goes on
	// settled is closed once Submit(k1) has returned. A walk of the open
	// operations begun after release waits for it (walkAfterSettle).
	settled chan struct{}
}

// AddKeyIgnoring announces only the first call: a later one is
// legitimate (an operation flagged ReviewKeyIgnored journals its
// endpoint again before its flag is cleared, keepFlagged), and blocking
// it on a channel nobody reads hung the drive and Close for ever.
func (s *slowKeyIgnoringSave) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	select {
	case s.entered <- endpoint:
	default:
	}
	<-s.release
	return s.Store.AddKeyIgnoring(ctx, endpoint)
}

// ForEachOpen is walkAfterSettle's.
func (s *slowKeyIgnoringSave) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	if err := s.walkAfterSettle(ctx); err != nil {
		return err
	}
	return s.Store.ForEachOpen(ctx, fn)
}

// walkAfterSettle holds a walk begun once the save was released until
// k1's outcome is committed (Submit returned; 10 s at most). Released, the
// save wakes k1's drive and ForgetKeyIgnoring at once, and the walk with
// which Forget flags the open operations to the endpoint that may have
// executed (flagSentTo) could find k1 still open, its 201 not yet
// committed, and flag it: k1's drive then journals the endpoint again
// before it clears that flag (keepUnreadFlag), as any drive reading a
// flag it did not set does, and the endpoint is back in the journal
// after the removal (57 of 200 runs). That order is not this test's: it
// holds that Forget waits for the save k1's answer started. A walk begun
// before the release (a Forget that did not wait) is not held.
func (s *slowKeyIgnoringSave) walkAfterSettle(ctx context.Context) error {
	select {
	case <-s.release:
	default:
		return nil
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-s.settled:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// A Solidgate payment endpoint answers k1's payment 201 marked
// Idempotency-Status: ignored ("Idempotency support varies by endpoint.
// [...] A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests), and the
// Client journals the endpoint beside the drive (saveIgnoring), on a
// Store slow to commit. ForgetKeyIgnoring called while that save is
// under way must wait for it: removed first, the endpoint would land in
// the journal after the removal, and the next process on it (a restart, a
// pgjournal replica) would read it back, the operator's forget undone
// with nothing said. Waiting, it removes what the save wrote: the
// journal keeps no endpoint, and the server saw k1 once.
func TestForgetKeyIgnoringWaitsForTheSaveUnderWay(t *testing.T) {
	sv := startSlowSave(t)
	c, endpoint := sv.client, sv.endpoint

	type result struct {
		known bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		known, err := c.ForgetKeyIgnoring(t.Context(), endpoint)
		done <- result{known, err}
	}()
	sv.awaitWaiters(t, 2, func() bool { return len(done) > 0 })
	sv.release()
	require.NoError(t, sv.awaitSubmitted(t), "Submit(k1)")
	var got result
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ForgetKeyIgnoring did not return once the save went on")
	}
	require.NoError(t, got.err, "ForgetKeyIgnoring()")
	require.True(t, got.known, "ForgetKeyIgnoring(): known")
	op, err := c.Lookup(t.Context(), "", "k1")
	require.NoError(t, err)
	require.Equal(t, StateSucceeded, op.State, "journal: k1's State")
	require.Empty(t, op.Review, "journal: k1's Review")
	require.NoError(t, c.Close()) // waits for any save still under way

	kept, err := sv.journal.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{}, append([]string{}, kept...), "journal: endpoints after ForgetKeyIgnoring()")
	require.Equal(t, []string{"k1"}, sv.keys(), "requests, by the key each carried")
}

// The same save under way, and the operator's call to forget the endpoint
// given up (a CLI's Ctrl-C, an admin request's deadline) while it waits:
// ForgetKeyIgnoring returns at once with the context's error and removes
// nothing. Removing on regardless, as it did once its 10 s were up,
// would let the save land after the removal: the forget undone at the
// next start-up while the caller was told it was done.
func TestForgetKeyIgnoringEndsWithItsContext(t *testing.T) {
	sv := startSlowSave(t)
	c, endpoint := sv.client, sv.endpoint

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.ForgetKeyIgnoring(ctx, endpoint)
		done <- err
	}()
	sv.awaitWaiters(t, 2, func() bool { return len(done) > 0 })
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled, "ForgetKeyIgnoring() given up")
	case <-time.After(20 * time.Second):
		t.Fatal("ForgetKeyIgnoring did not return when its context ended")
	}
	require.Contains(t, c.ignoring.known(), endpoint, "memory: the endpoint, not forgotten")
	sv.release()
	require.NoError(t, sv.awaitSubmitted(t), "Submit(k1)")
	require.NoError(t, c.Close())
	kept, err := sv.journal.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{endpoint}, append([]string{}, kept...), "journal: endpoints, nothing removed")
	require.Equal(t, []string{"k1"}, sv.keys(), "requests, by the key each carried")
}

// slowSave is a Client whose Store is journaling the endpoint k1's
// payment taught it (Solidgate's Idempotency-Status: ignored), held until
// release.
type slowSave struct {
	client   *Client
	journal  *journal.Store
	store    *slowKeyIgnoringSave
	endpoint string
	release  func()
	// submitted: Submit(k1)'s error, once it returns.
	submitted chan error
	mu        sync.Mutex
	sent      []string // the Idempotency-Key of each request, in order
}

func startSlowSave(t *testing.T) *slowSave {
	sv := &slowSave{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sv.mu.Lock()
		sv.sent = append(sv.sent, r.Header.Get("Idempotency-Key"))
		sv.mu.Unlock()
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"pay_1","status":"settled"}`)
	}))
	t.Cleanup(srv.Close)
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	sv.journal = js
	sv.store = &slowKeyIgnoringSave{Store: js, entered: make(chan string, 1), release: make(chan struct{}), settled: make(chan struct{})}
	c, err := New(sv.store, WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	sv.client = c
	var releaseOnce sync.Once
	sv.release = func() { releaseOnce.Do(func() { close(sv.store.release) }) }
	t.Cleanup(func() { sv.release(); _ = c.Close() })
	charge := srv.URL + "/api/v1/charge"
	sv.endpoint = "POST " + charge

	// k1's outcome, unflagged, is committed once the endpoint is: Submit
	// waits for the save (a second waiter, ForgetKeyIgnoring, joins it).
	sv.submitted = make(chan error, 1)
	go func() {
		res, err := c.Submit(t.Context(), Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
		close(sv.store.settled)
		if err == nil && res.ResourceID != "pay_1" {
			err = fmt.Errorf("Submit(k1) settled with %q, not pay_1", res.ResourceID)
		}
		sv.submitted <- err
	}()
	select {
	case e := <-sv.store.entered:
		require.Equal(t, sv.endpoint, e, "the endpoint being journaled")
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint was never journaled")
	}
	sv.awaitWaiters(t, 1, func() bool { return len(sv.submitted) > 0 })
	require.Zero(t, len(sv.submitted), "Submit(k1) returned before its endpoint was journaled")
	return sv
}

// awaitWaiters returns once n callers wait for the save (waitSaves), or
// once returned says the one expected last returned without waiting.
func (sv *slowSave) awaitWaiters(t *testing.T, n int, returned func() bool) {
	require.Eventually(t, func() bool {
		if returned() {
			return true
		}
		sv.client.ignoring.mu.Lock()
		defer sv.client.ignoring.mu.Unlock()
		return sv.client.ignoring.waiting >= n
	}, 10*time.Second, time.Millisecond, "neither waited for the save nor returned")
}

// awaitSubmitted returns Submit(k1)'s error once it returns.
func (sv *slowSave) awaitSubmitted(t *testing.T) error {
	select {
	case err := <-sv.submitted:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Submit(k1) did not return once its endpoint was journaled")
		return nil
	}
}

func (sv *slowSave) keys() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return slices.Clone(sv.sent)
}
