package idem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A Call hook that panicked on a Resume visit's operation (visitCaught
// catches it) skipped the drive's release of its claim: the lease stayed
// held until it expired, keeping every other owner (a replica sharing a
// pgjournal database) off the operation. Now the claim is released; the
// operation is untouched, nothing sent.
func TestCallHookPanicReleasesVisitLease(t *testing.T) {
	ctx := context.Background()
	var posts atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer ts.Close()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	defer store.Close()
	call := func(ctx context.Context, ev idem.CallEvent) (context.Context, func(*idem.Result, error)) {
		panic("metrics hook: " + ev.Key)
	}
	c, err := idem.New(store, idem.WithHTTPClient(ts.Client()), idem.WithHooks(idem.Hooks{Call: call}))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Prepare(ctx, idem.Request{Key: "k", URL: ts.URL + "/orders", Body: []byte(`{"amount":1200}`)})
	require.NoError(t, err)
	_, err = c.Resume(ctx)
	require.NoError(t, err)
	now := time.Now()
	rec, _, err := store.Claim(ctx, idem.DefaultScope, "k", "another-replica", now, now.Add(time.Minute))
	require.NoError(t, err, "another owner's claim after the visit")
	require.Equal(t, journal.StatePending, rec.State)
	require.Zero(t, posts.Load())
}

// A caller's decoder panicked on the answer to its Submit (a bug in the
// caller's code; net/http's server recovers a handler's panic, and the
// process lives on): the drive's release of its lease was skipped, and
// every other owner (a replica sharing a pgjournal database: its
// reconciler, or the caller's retry a load balancer sent there) was kept
// off the operation until the lease expired (30 s at default settings).
// The server keeps keys (idemtest's, Stripe-like: "subsequent requests
// with the same key return the same result",
// https://docs.stripe.com/idempotency). Now the lease is released on the
// panic's way up: another owner claims it at once, and the caller's
// retry resends under the same key, the server replays: one order.
func TestCallerPanicReleasesItsLease(t *testing.T) {
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	var decoded atomic.Int32
	c, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithDecoder(func(a *idem.Answer) (idem.Outcome, error) {
		if decoded.Add(1) == 1 {
			panic("decoder bug")
		}
		return idem.DecodeJSON(a)
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	req := idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":1200}`)}

	panicked := func() (p any) {
		defer func() { p = recover() }()
		_, _ = c.Submit(t.Context(), req)
		return nil
	}()
	require.NotNil(t, panicked, "the decoder's panic goes on up the caller's stack")
	require.Equal(t, 1, srv.Effects("", "k"), "orders after the panic")
	now := time.Now()
	_, l, err := store.Claim(t.Context(), idem.DefaultScope, "k", "another-replica", now, now.Add(time.Minute))
	require.NoError(t, err, "another owner's claim after the panic")
	require.NoError(t, store.Release(t.Context(), l))

	// Well within the lease: a retry held by it gives up first.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := c.Submit(ctx, req)
	require.NoError(t, err, "the caller's retry")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, srv.Effects("", "k"), "orders after the retry")
	rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	for _, a := range rec.Attempts {
		require.Equal(t, journal.AttemptSubmit, a.Kind, "attempt %d", a.Number)
	}
}
