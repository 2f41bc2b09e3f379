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
