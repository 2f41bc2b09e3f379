package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
)

// endingResolveStore ends the request under way (end) once its
// resolution has committed, as a timeout middleware's deadline passing
// just after a slow commit would.
type endingResolveStore struct {
	*journal.Store
	mu  sync.Mutex
	end context.CancelFunc
}

func (s *endingResolveStore) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	rec, err := s.Store.Resolve(ctx, scope, key, m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != nil {
		s.end()
	}
	return rec, err
}

// The service mounts the admin handler behind a timeout middleware that
// ends the request's context at its deadline and lets the handler's own
// answer through (chi's middleware.Timeout: "cancels ctx after a given
// timeout"; its 504 is written only if the handler wrote nothing). A
// resolution committed just before that deadline was answered 503
// "unavailable" (the read of the record after the write ran under the
// ended context), so the operator took a written resolution for one that
// failed. It is now answered 200 with the record as resolved.
func TestResolveCommittedAsTheRequestEndsIsAnsweredResolved(t *testing.T) {
	js, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.Close() })
	store := &endingResolveStore{Store: js}
	c, err := idem.New(store)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Prepare(context.Background(), idem.Request{Key: "k", URL: "http://127.0.0.1:1/v1/charges", Body: []byte(`{"amount":500}`)})
	require.NoError(t, err)

	h := admin.NewHandler(c)
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		store.mu.Lock()
		store.end = cancel
		store.mu.Unlock()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(a.Close)

	f := &fixture{t: t, admin: a}
	var ans admin.ResolveAnswer
	status := f.do(http.MethodPost, "/resolve", `{"key":"k","state":"failed","reason":"not in the dashboard","by":"alice"}`, &ans)
	rec, err := js.Get(context.Background(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, journal.StateFailed, rec.State, "journaled state")
	require.Equal(t, http.StatusOK, status, "POST /resolve of a resolution journaled")
	require.NotNil(t, ans.Operation)
	require.Equal(t, string(idem.StateFailed), ans.Operation.State)
}
