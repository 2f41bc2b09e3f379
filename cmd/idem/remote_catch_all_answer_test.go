package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/journal"
)

// An operator at 3 a.m. gives -url the service's address without the
// handler's mount path (http://127.0.0.1:PORT/ for .../idem/). The service
// also serves "/", which net/http's ServeMux matches for every path no
// other pattern matches ("the pattern "/" matches all paths not matched by
// other registered patterns", https://pkg.go.dev/net/http#ServeMux): a
// JSON index, answered 200 to GET and POST alike (modelled on a service's
// status root). Every command took that answer for the handler's: resolve
// panicked (exit 2, a stack trace), key-ignoring remove printed "removed"
// with exit 0 though nothing was removed, list -review said "no
// operations match" over an operation flagged for review, show printed an
// empty operation and stats zeros. Each now fails (exit 1), says to check
// -url, and the journal is left as it was.
func TestRemoteCatchAllAnswerIsNotTheHandlers(t *testing.T) {
	fx := newJournal(t)
	keepEndpoints(t, fx.path, chargeEndpoint)
	c, err := idem.Open(fx.path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	mux := http.NewServeMux()
	mux.Handle("/idem/", http.StripPrefix("/idem", admin.NewHandler(c)))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"service":"payments","status":"ok"}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	root := srv.URL + "/" // the mount path, /idem/, left off

	for _, args := range [][]string{
		{"resolve", "k-pending", "-failed", "-reason", "never reached the provider"},
		{"key-ignoring", "remove", chargeEndpoint},
		{"key-ignoring", "list"},
		{"list", "-review"},
		{"show", "k-unknown"},
		{"stats"},
	} {
		t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
			// A child process: a panic must fail this subtest, not end the
			// test binary.
			stdout, stderr, code := runIdemProcess(t, append([]string{"-url", root}, args...)...)
			require.Equal(t, 1, code, "idem %q: exit status\nstdout: %s\nstderr: %.400s", args, stdout, stderr)
			require.Empty(t, stdout, "idem %q printed the other service's answer as the handler's", args)
			require.Contains(t, stderr, "not the admin handler's answer", "idem %q", args)
			require.Contains(t, stderr, "check -url", "idem %q", args)
		})
	}

	rec, err := c.Record(t.Context(), "default", "k-pending")
	require.NoError(t, err)
	require.Equal(t, journal.StatePending, rec.State, "k-pending's state")
	require.Nil(t, rec.Resolved, "k-pending's resolution")
	es, err := c.KeyIgnoringEndpoints(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{chargeEndpoint}, es, "endpoints ignoring the key")

	// The handler at its mount path still works for every command.
	stdout, stderr, code := runIdem(t, "-url", srv.URL+"/idem/", "key-ignoring", "remove", chargeEndpoint)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "removed "+chargeEndpoint)
	stdout, stderr, code = runIdem(t, "-url", srv.URL+"/idem/", "resolve", "k-pending", "-failed", "-reason", "never reached the provider")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "pending -> failed")
}
