package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
)

// A service whose admin handler names the verified login
// (admin.WithOperator, from the SSO proxy's header here) records that name
// as the resolution's by, with the name the tool sent beside it. resolve
// printed the -by it sent (the jump box's $USER) as who resolved the
// operation: the line an operator pastes into the incident ticket named
// someone the journal does not. It prints what the service recorded.
func TestRemoteResolvePrintsTheRecordedOperator(t *testing.T) {
	fx := newJournal(t)
	c, err := idem.Open(fx.path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	login := func(r *http.Request) (string, error) { return r.Header.Get("X-Forwarded-User"), nil }
	h := admin.NewHandler(c, admin.WithOperator(login))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Forwarded-User", "alice@example.com") // as an authenticating proxy sets it
		http.StripPrefix("/idem", h).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	stdout, stderr, code := runIdem(t, "-url", srv.URL+"/idem/", "resolve", "k-unknown", "-failed",
		"-reason", "  never reached the provider  ", "-by", "root")
	require.Equal(t, 0, code, stderr)
	rec, err := c.Record(t.Context(), "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, "alice@example.com (said root)", rec.Resolved.By, "recorded by")
	require.Regexp(t, `(?m)^  by:\s+alice@example\.com \(said root\)$`, stdout)
	require.Regexp(t, `(?m)^  reason:\s+never reached the provider$`, stdout)
}
