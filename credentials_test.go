package idem_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Credentials: "added at send time ... and are never written to disk". A
// request hook that puts the API key in the query string (as some APIs
// want) had it written to the journal and the log: net/http's *url.Error
// text carries the full URL, and idem stored and logged that text.
func TestHookCredentialInURLNotJournaledOrLogged(t *testing.T) {
	const secret = "sk_live_QUERY_SECRET"
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events []idem.AttemptEvent
	e := newEnv(t, script(step{err: dialRefused}), clientOpts(
		idem.WithLogger(logger),
		idem.WithHooks(idem.Hooks{Attempt: func(_ context.Context, ev idem.AttemptEvent) { events = append(events, ev) }}),
		idem.WithRequestHook(func(r *http.Request) error {
			r.Header.Set("Authorization", scope)
			q := r.URL.Query()
			q.Set("api_key", secret)
			r.URL.RawQuery = q.Encode()
			return nil
		})))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	rec := e.record("k")
	for _, a := range rec.Attempts {
		require.NotContains(t, a.Err, secret, "a credential was journaled")
	}
	require.NoError(t, e.client.Close())
	require.NoError(t, e.store.Close())
	raw, err := os.ReadFile(e.path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(secret)), "a credential is in the journal file")
	mu.Lock()
	require.NotContains(t, logs.String(), secret, "a credential was logged")
	mu.Unlock()
	require.NotEmpty(t, events)
	require.Error(t, events[0].Err)
	require.NotContains(t, events[0].Err.Error(), secret)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
