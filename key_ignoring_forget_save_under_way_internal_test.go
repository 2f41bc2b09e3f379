package idem

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	entered chan string   // each endpoint AddKeyIgnoring was called with
	release chan struct{} // closed: AddKeyIgnoring goes on
}

func (s *slowKeyIgnoringSave) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	s.entered <- endpoint
	<-s.release
	return s.Store.AddKeyIgnoring(ctx, endpoint)
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
	var mu sync.Mutex
	var keys []string // the Idempotency-Key of each request, in order
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.Header().Set("Idempotency-Status", "ignored")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"pay_1","status":"settled"}`)
	}))
	t.Cleanup(srv.Close)
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &slowKeyIgnoringSave{Store: js, entered: make(chan string, 1), release: make(chan struct{})}
	c, err := New(store, WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(store.release) }) }
	t.Cleanup(func() { release(); _ = c.Close() })
	charge := srv.URL + "/api/v1/charge"
	endpoint := "POST " + charge

	res, err := c.Submit(t.Context(), Request{Key: "k1", URL: charge, Body: []byte(`{"amount":1}`)})
	require.NoError(t, err, "Submit(k1)")
	require.Equal(t, "pay_1", res.ResourceID)
	select {
	case e := <-store.entered:
		require.Equal(t, endpoint, e, "the endpoint being journaled")
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint was never journaled")
	}

	type result struct {
		known bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		known, err := c.ForgetKeyIgnoring(t.Context(), endpoint)
		done <- result{known, err}
	}()
	// Released once ForgetKeyIgnoring waits for the save (waitSaves made
	// the channel it waits on), or once it returned without waiting.
	require.Eventually(t, func() bool {
		if len(done) > 0 {
			return true
		}
		c.ignoring.mu.Lock()
		defer c.ignoring.mu.Unlock()
		return c.ignoring.saved != nil
	}, 10*time.Second, time.Millisecond, "ForgetKeyIgnoring neither waited for the save nor returned")
	release()
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

	kept, err := js.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{}, append([]string{}, kept...), "journal: endpoints after ForgetKeyIgnoring()")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"k1"}, keys, "requests, by the key each carried")
}
