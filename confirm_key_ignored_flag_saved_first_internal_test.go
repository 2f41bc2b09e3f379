package idem

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// heldKeyIgnoringSave is a journal whose AddKeyIgnoring never commits: a
// process killed while journaling the endpoint (modelled in one process:
// the save is held until the test lets it fail).
type heldKeyIgnoringSave struct {
	*journal.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *heldKeyIgnoringSave) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return errors.New("the process died before this save committed")
}

// A Solidgate payment endpoint ignores the key ("A value of ignored means
// the endpoint does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
// After a restart the journal holds x, flagged ReviewKeyIgnored by the
// process before (its save of the endpoint lost with it), and l, whose
// answer there was lost; the endpoint is journaled nowhere else. x's
// webhook comes first: Confirm settles x and clears its flag, the one
// thing on disk that said the endpoint ignores the key. Committed while
// the endpoint's save is still under way (the process then killed), the
// next process resent l under the same key: a second charge. Confirm now
// journals the endpoint first; a save that does not end within the call's
// context writes nothing (the provider delivers the event again), and the
// next process still finds x flagged and flags l.
func TestConfirmOfAKeyIgnoredFlagSavesTheEndpointFirst(t *testing.T) {
	var mu sync.Mutex
	charges := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		charges[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.Header().Set("Idempotency-Status", "ignored")
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/api/v1/charge"
	path := filepath.Join(t.TempDir(), "idem.journal")
	js, err := journal.Open(path)
	require.NoError(t, err)
	sent := []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: time.Now(), Wrote: true, Done: true}}
	body := []byte(`{"amount":100}`)
	for key, review := range map[string]string{"x": ReviewKeyIgnored, "l": ""} {
		_, err := js.Create(t.Context(), &journal.Record{Scope: DefaultScope, Key: key, Method: http.MethodPost, URL: url,
			Body: body, BodySHA: sha256.Sum256(body), State: journal.StatePending, Created: time.Now()})
		require.NoError(t, err)
		_, err = js.Update(t.Context(), DefaultScope, key, func(r *journal.Record) error {
			r.State, r.Review, r.Attempts, r.FirstSent = journal.StateUnknown, review, sent, sent[0].Start
			return nil
		})
		require.NoError(t, err)
	}

	store := &heldKeyIgnoringSave{Store: js, entered: make(chan struct{}), release: make(chan struct{})}
	c, err := New(store, WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.Confirm(ctx, "", "x", Confirmation{State: StateSucceeded, ResourceID: "pay_x", Source: "solidgate", EventID: "evt_1"})
		done <- err
	}()
	select {
	case <-store.entered:
	case err := <-done:
		t.Fatalf("Confirm(x) returned before journaling the endpoint: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint was never journaled")
	}
	cancel() // the webhook's request ends, or the process dies
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled, "Confirm(x) while the endpoint is being journaled")
	case <-time.After(10 * time.Second):
		t.Fatal("Confirm(x) did not return when its context ended")
	}
	rec, err := js.Get(t.Context(), DefaultScope, "x")
	require.NoError(t, err)
	require.Equal(t, ReviewKeyIgnored, rec.Review, "journal: x still flagged")
	close(store.release)
	require.NoError(t, c.Close())
	require.NoError(t, js.Close())

	c2, err := Open(path, WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	_, err = c2.Resume(t.Context())
	require.NoError(t, err)
	mu.Lock()
	require.Zero(t, charges["l"], "l resent after the restart")
	mu.Unlock()
	rec, err = c2.store.Get(t.Context(), DefaultScope, "l")
	require.NoError(t, err)
	require.Equal(t, ReviewKeyIgnored, rec.Review, "journal: l flagged for the endpoint")
}
