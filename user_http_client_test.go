package idem_test

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestUserHTTPClientJarAndRedirects pins what a caller's own http.Client
// brings: its cookie jar works at send time and its cookies never reach
// the journal; its CheckRedirect is replaced, so a redirected submit is
// never followed (a followed POST would become a body-less GET, or resend
// the body to wherever the Location points).
func TestUserHTTPClientJarAndRedirects(t *testing.T) {
	const cookie = "PLANTED_SESSION_COOKIE"
	var (
		mu        sync.Mutex
		cookies   []string
		moved     atomic.Int64
		redirects atomic.Int64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			moved.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"ord_moved"}`))
		case "/redirect":
			http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
		default:
			mu.Lock()
			cookies = append(cookies, r.Header.Get("Cookie"))
			first := len(cookies) == 1
			mu.Unlock()
			if first {
				http.SetCookie(w, &http.Cookie{Name: "session", Value: cookie, Path: "/"})
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"ord_1"}`))
		}
	}))
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		redirects.Add(1)
		return nil // follow everything
	}}
	path := filepath.Join(t.TempDir(), "idem.journal")
	store, err := journal.Open(path)
	require.NoError(t, err)
	c, err := idem.New(store, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
	require.NoError(t, err)

	res, err := c.Submit(t.Context(), idem.Request{Key: "jar", URL: srv.URL + "/orders", Body: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, []string{"", "session=" + cookie}, cookies, "Cookie headers the server got")

	_, err = c.Submit(t.Context(), idem.Request{Key: "redirect", URL: srv.URL + "/redirect", Body: []byte(`{}`)})
	require.Error(t, err, "Submit() of a redirected request")
	require.Zero(t, moved.Load(), "requests to the redirect's target")
	require.Zero(t, redirects.Load(), "calls of the caller's CheckRedirect")

	require.NoError(t, c.Close())
	require.NoError(t, store.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(cookie)), "journal holds the jar's cookie")
}
