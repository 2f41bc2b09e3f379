package idem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// sleepUntilStopped is a Clock whose waits end only with their context,
// each told on sleeping first: a backoff that lasts until Shutdown stops
// the call.
type sleepUntilStopped struct{ sleeping chan struct{} }

func (sleepUntilStopped) Now() time.Time { return time.Now() }

func (c sleepUntilStopped) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case c.sleeping <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// A rollout hands a journal over while the old Client drains: a Solidgate
// payment endpoint that does not de-duplicate by the key ("A value of
// ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests) charged
// payment y, its answer lost, and the old Client backs off before
// resending. Its Shutdown begins; the new Client is made on the Store
// (New takes it once Shutdown has begun) and runs Resume, as README's
// start-up does: y is the old Client's call's, left to it. Payment x, in
// flight meanwhile, is answered 201 marked ignored: the old Client learns
// the endpoint and journals it before x's answer. Its grace ends and y's
// call stops, y left unknown for the next visit. The new Client had read
// the journaled endpoints once, before x taught it, and never again: its
// Run resent y with the same key, and the endpoint charged it again. Read
// again before a resend of what may have executed, the journaled endpoint
// stops it: y is charged once, flagged ReviewKeyIgnored.
func TestKeyIgnoringEndpointLearntWhileHandingOverStopsTheResend(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	charges := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost {
			return // the clock's HEAD probe charges nothing
		}
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		charges[key]++
		n := charges[key]
		mu.Unlock()
		switch {
		case key == "y" && n == 1:
			dropConnection(w) // charged, its answer lost
			return
		case key == "x":
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		ignoredCreated(n, w)
	}))
	t.Cleanup(srv.Close)
	charged := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return charges[key]
	}
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	pay := srv.URL + "/api/v1/charge"

	clk := sleepUntilStopped{sleeping: make(chan struct{}, 1)}
	old, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = old.Close() })

	yDone := make(chan error, 1)
	go func() {
		_, err := old.Submit(context.Background(), idem.Request{Key: "y", URL: pay, Body: []byte(`{"amount":100}`)})
		yDone <- err
	}()
	select {
	case <-clk.sleeping: // y's answer lost; its resend waits
	case err := <-yDone:
		t.Fatalf("Submit(y) returned before its backoff: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Submit(y) never backed off")
	}
	xDone := make(chan error, 1)
	go func() {
		_, err := old.Submit(context.Background(), idem.Request{Key: "x", URL: pay, Body: []byte(`{"amount":5}`)})
		xDone <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for charged("x") == 0 {
		require.True(t, time.Now().Before(deadline), "x never reached the server")
		time.Sleep(time.Millisecond)
	}

	grace, endGrace := context.WithCancel(context.Background())
	defer endGrace()
	shutDown := make(chan error, 1)
	go func() { shutDown <- old.Shutdown(grace) }()
	var next *idem.Client
	for {
		next, err = idem.New(store, idem.WithHTTPClient(srv.Client()))
		if err == nil {
			break
		}
		require.ErrorIs(t, err, idem.ErrInvalidRequest, "New: refused only while the old Client is open")
		require.True(t, time.Now().Before(deadline), "New never took the Store from the closing Client")
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { _ = next.Close() })
	sum, err := next.Resume(t.Context())
	require.NoError(t, err, "Resume()")
	require.Equal(t, 2, sum.Visited, "Resume(): x and y, both the old Client's calls'")

	close(release)
	require.NoError(t, <-xDone, "Submit(x): 201, marked ignored")
	endGrace()
	require.ErrorIs(t, <-yDone, idem.ErrUnknownOutcome, "Submit(y): stopped by Shutdown")
	require.ErrorIs(t, <-shutDown, context.Canceled)
	op, err := next.Lookup(t.Context(), "", "y")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State, "journal: y left open")
	require.Equal(t, "", op.Review, "journal: y left unflagged by the old Client")
	kept, err := store.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"POST " + pay}, kept, "journal: the endpoint, journaled by the old Client")

	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- next.Run(runCtx) }()
	for {
		op, err = next.Lookup(t.Context(), "", "y")
		require.NoError(t, err)
		if op.Review != "" || op.State.Terminal() {
			break
		}
		require.True(t, time.Now().Before(deadline.Add(10*time.Second)), "Run never visited y")
		time.Sleep(time.Millisecond)
	}
	stopRun()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("y: %d charges, %s, review %q", charged("y"), op.State, op.Review)
	require.Equal(t, 1, charged("y"), "charges of y: a resend to an endpoint that ignores the key charges again")
	require.Equal(t, idem.ReviewKeyIgnored, op.Review, "journal: y's Review")
	require.Equal(t, idem.StateUnknown, op.State, "journal: y's State")
}
