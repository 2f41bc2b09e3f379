package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// IDEM_AUTHORIZATION opens a service's admin handler, which settles
// operations by hand. Sent over plain http to another host, anyone on the
// path could read and replay it; the CLI refuses unless the operator says
// the network encrypts the hop (-allow-http). The child process reaches
// "other hosts" through an HTTP proxy on 127.0.0.1 (HTTP_PROXY), so a
// request the CLI should not send is counted, not sent anywhere.
// countingProxy makes an HTTP proxy on 127.0.0.1 the child processes'
// way to every http:// host (HTTP_PROXY) and counts the requests it gets,
// and those of them that carry an Authorization header; it answers each
// 404.
func countingProxy(t *testing.T) (proxied, sawCredential *atomic.Int32) {
	t.Helper()
	proxied, sawCredential = new(atomic.Int32), new(atomic.Int32)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		if r.Header.Get("Authorization") != "" {
			sawCredential.Add(1)
		}
		http.Error(w, "not here", http.StatusNotFound)
	}))
	t.Cleanup(proxy.Close)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	return proxied, sawCredential
}

func TestRemoteRefusesTheCredentialOverPlainHTTPToAnotherHost(t *testing.T) {
	const credential = "Bearer op_PLANTED_CREDENTIAL"
	proxied, sawCredential := countingProxy(t)
	t.Setenv("IDEM_AUTHORIZATION", credential)
	requireRefusedInClear(t, "IDEM_AUTHORIZATION would cross the network in clear text",
		[]string{"-url", "http://admin.svc.example/idem/", "list"},
		[]string{"-url", "http://10.0.0.7:8081/idem/", "stats"},
		[]string{"-url", "http://admin.svc.example/idem/", "resolve", "-failed", "-reason", "declined", "k"})
	require.Zero(t, proxied.Load(), "requests sent")

	// Told the hop is encrypted, it sends (the proxy stands in for the
	// mesh): the refusal above is the check's, not a failure to connect.
	_, stderr, code := runIdemProcess(t, "-allow-http", "-url", "http://admin.svc.example/idem/", "list")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, int32(1), proxied.Load())
	require.Equal(t, int32(1), sawCredential.Load())

	// Without a credential there is nothing to leak.
	t.Setenv("IDEM_AUTHORIZATION", "")
	_, stderr, code = runIdemProcess(t, "-url", "http://admin.svc.example/idem/", "list")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, int32(2), proxied.Load())
	require.Equal(t, int32(1), sawCredential.Load())
}

func TestRemoteSendsTheCredentialOverPlainHTTPToThisMachine(t *testing.T) {
	t.Setenv("IDEM_AUTHORIZATION", "Bearer op_PLANTED_CREDENTIAL")
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			got.Add(1)
		}
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	port := srv.URL[len("http://127.0.0.1:"):]
	for _, base := range []string{srv.URL, "http://localhost:" + port, "http://[::ffff:127.0.0.1]:" + port} {
		_, stderr, code := runIdem(t, "-url", base+"/idem/", "list")
		require.Equal(t, 1, code, stderr) // the handler's 404, after the send
		require.NotContains(t, stderr, "clear text")
	}
	require.Equal(t, int32(3), got.Load())
}

// A loopback name that net/http does not take for one goes through
// HTTP_PROXY: Go's proxy rules (golang.org/x/net/http/httpproxy) exempt
// only "localhost" as written and loopback addresses, so "LOCALHOST" or
// "localhost." is sent to the proxy, in clear text, across the network.
// The CLI takes such a -url for another host when a proxy would carry it.
func TestRemoteRefusesTheCredentialToAProxiedLoopbackName(t *testing.T) {
	proxied, _ := countingProxy(t)
	t.Setenv("IDEM_AUTHORIZATION", "Bearer op_PLANTED_CREDENTIAL")
	for _, base := range []string{"http://LOCALHOST:9", "http://localhost.:9", "http://Localhost:9"} {
		stdout, stderr, code := runIdemProcess(t, "-url", base+"/idem/", "list")
		require.Equal(t, 2, code, "%s: %s%s", base, stdout, stderr)
		require.Contains(t, stderr, "IDEM_AUTHORIZATION would cross the network in clear text")
	}
	require.Zero(t, proxied.Load(), "requests sent through the proxy")
}

// A password in -url (http://user:password@host/) is a credential too:
// net/http sends it as HTTP Basic authorization (RFC 7617) when no
// Authorization header is set, which is the case without
// IDEM_AUTHORIZATION. The clear-text check looked at IDEM_AUTHORIZATION
// alone, so the password crossed the network in clear to another host.
func TestRemoteRefusesURLUserInfoOverPlainHTTPToAnotherHost(t *testing.T) {
	proxied, sawCredential := countingProxy(t)
	t.Setenv("IDEM_AUTHORIZATION", "")
	requireRefusedInClear(t, "(sent as Basic authorization) would cross the network in clear text",
		[]string{"-url", "http://operator:op_PLANTED_PASSWORD@admin.svc.example/idem/", "list"},
		[]string{"-url", "http://op_PLANTED_TOKEN@10.0.0.7:8081/idem/", "stats"})
	require.Zero(t, proxied.Load(), "requests sent")

	_, stderr, code := runIdemProcess(t, "-allow-http", "-url", "http://operator:op_PLANTED_PASSWORD@admin.svc.example/idem/", "list")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, int32(1), proxied.Load())
	require.Equal(t, int32(1), sawCredential.Load(), "the password, as Basic authorization")
}

// requireRefusedInClear runs each command line as a process: each is a
// usage error saying why (want) and how to pass, naming no credential.
func requireRefusedInClear(t *testing.T, want string, cmds ...[]string) {
	t.Helper()
	for _, args := range cmds {
		stdout, stderr, code := runIdemProcess(t, args...)
		require.Equal(t, 2, code, "%q: %s%s", args, stdout, stderr)
		require.Contains(t, stderr, want)
		require.Contains(t, stderr, "-allow-http")
		require.NotContains(t, stdout+stderr, "PLANTED")
	}
}
