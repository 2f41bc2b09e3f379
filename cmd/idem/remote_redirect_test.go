package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// A proxy that terminates TLS in front of the service and builds its
// redirects from the scheme it was reached by (Django without
// SECURE_PROXY_SSL_HEADER, nginx's `return 301 http://$host$request_uri`)
// sends the CLI to another origin of the same host name. net/http forwards
// the Authorization header to any URL of the same host name, whatever its
// scheme or port: IDEM_AUTHORIZATION went to that origin, in clear text
// over http. The CLI follows no redirect: it names the target instead.
func TestRemoteDoesNotFollowARedirectWithTheCredential(t *testing.T) {
	const credential = "Bearer op_PLANTED_CREDENTIAL"
	t.Setenv("IDEM_AUTHORIZATION", credential)
	var other, sawCredential atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		if r.Header.Get("Authorization") != "" {
			sawCredential.Add(1)
		}
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer elsewhere.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusMovedPermanently)
	}))
	defer proxy.Close()

	for _, args := range [][]string{
		{"-url", proxy.URL + "/idem/", "list"},
		{"-url", proxy.URL + "/idem/", "resolve", "-failed", "-reason", "declined", "k"},
	} {
		stdout, stderr, code := runIdem(t, args...)
		require.Equal(t, 1, code, "%q: %s%s", args, stdout, stderr)
		require.Contains(t, stderr, elsewhere.URL+"/idem/", "the message names where the handler sent it")
		require.NotContains(t, stdout+stderr, "PLANTED")
	}
	require.Zero(t, other.Load(), "requests sent to the redirect's target")
	require.Zero(t, sawCredential.Load())
}
