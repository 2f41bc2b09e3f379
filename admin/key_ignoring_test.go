package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// charge is an endpoint journaled as ignoring the key, as a Client names
// it: Solidgate's payment endpoints say so per endpoint ("Idempotency
// support varies by endpoint. [...] A value of ignored means the endpoint
// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
const charge = "POST https://api.solidgate.example/api/v1/charge"

// keyIgnoringFixture is a running Client whose journal keeps charge, read
// into its memory, and the handler for it.
func keyIgnoringFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: idemtest.NewClock(epoch)}
	var err error
	f.store, err = journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.store.Close() })
	require.NoError(t, f.store.AddKeyIgnoring(t.Context(), charge))
	f.client, err = idem.New(f.store, idem.WithClock(f.clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.client.Close() })
	f.admin = httptest.NewServer(admin.NewHandler(f.client, admin.WithClock(f.clock)))
	t.Cleanup(f.admin.Close)
	return f
}

// GET /key-ignoring lists the endpoints; POST /key-ignoring/remove removes
// one from the journal and from the running Client, and an unknown one is
// a 404 that says how to find the right one.
func TestKeyIgnoringListAndRemove(t *testing.T) {
	f := keyIgnoringFixture(t)
	var list admin.KeyIgnoring
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/key-ignoring", "", &list))
	require.Equal(t, []string{charge}, list.Endpoints, "GET /key-ignoring")

	var removed admin.RemoveKeyIgnoringAnswer
	require.Equal(t, http.StatusOK, f.do(http.MethodPost, "/key-ignoring/remove", `{"endpoint":"`+charge+`"}`, &removed))
	require.Equal(t, charge, removed.Removed)

	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/key-ignoring", "", &list))
	require.Equal(t, []string{}, list.Endpoints, "GET /key-ignoring after the removal")
	kept, err := f.store.KeyIgnoringEndpoints(context.Background())
	require.NoError(t, err)
	require.Empty(t, kept, "journal: endpoints after the removal")
	known, err := f.client.ForgetKeyIgnoring(context.Background(), charge)
	require.NoError(t, err)
	require.False(t, known, "the Client's memory still held it")

	var e struct{ Error admin.Error }
	require.Equal(t, http.StatusNotFound, f.do(http.MethodPost, "/key-ignoring/remove", `{"endpoint":"`+charge+`"}`, &e))
	require.Equal(t, "not_found", e.Error.Code)
	require.Equal(t, `no endpoint "`+charge+`" is known to ignore the idempotency key; list them with `+
		"`idem key-ignoring`"+` and pass one as listed ("METHOD URL")`, e.Error.Message)
}

func TestKeyIgnoringBadInput(t *testing.T) {
	f := keyIgnoringFixture(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{http.MethodPost, "/key-ignoring/remove", `{}`, http.StatusBadRequest, "bad_request"},
		{http.MethodPost, "/key-ignoring/remove", `{"endpoint":"` + charge + `","force":true}`, http.StatusBadRequest, "bad_request"},
		{http.MethodPost, "/key-ignoring/remove", `{"endpoint":"` + charge + `"}{"endpoint":"` + charge + `"}`, http.StatusBadRequest, "bad_request"},
		{http.MethodPost, "/key-ignoring/remove", `POST https://api.solidgate.example/api/v1/charge`, http.StatusBadRequest, "bad_request"},
		{http.MethodPost, "/key-ignoring/remove", `{"endpoint":"` + strings.Repeat("x", 128<<10) + `"}`, http.StatusBadRequest, "bad_request"},
		{http.MethodPost, "/key-ignoring/remove", `{"endpoint":42}`, http.StatusBadRequest, "bad_request"},
		// An operator who pasted a URL with its credentials: no endpoint
		// name holds them (the Client journals and logs it without), and
		// the answer must not carry the password back into a log.
		{http.MethodPost, "/key-ignoring/remove", `{"endpoint":"POST https://shop:hunter2@api.solidgate.example/api/v1/charge"}`, http.StatusBadRequest, "bad_request"},
		{http.MethodGet, "/key-ignoring/remove", "", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodDelete, "/key-ignoring", "", http.StatusMethodNotAllowed, "method_not_allowed"},
	} {
		var e struct{ Error admin.Error }
		require.Equal(t, tc.status, f.do(tc.method, tc.path, tc.body, &e), "%s %s %s", tc.method, tc.path, tc.body)
		require.Equal(t, tc.code, e.Error.Code, "%s %s %s", tc.method, tc.path, tc.body)
		require.NotContains(t, e.Error.Message, "hunter2", "%s %s %s", tc.method, tc.path, tc.body)
	}
	kept, err := f.store.KeyIgnoringEndpoints(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{charge}, kept, "journal: a refused removal removed it")
}

// A removal is a state-changing POST: refused when a browser sends it for
// another site, or as a body a form can make, as /resolve is.
func TestKeyIgnoringRemoveRefusesCrossSiteRequests(t *testing.T) {
	f := keyIgnoringFixture(t)
	body := `{"endpoint":"` + charge + `"}`
	status, code := f.post(t, "/key-ignoring/remove", body, http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"cross-site"}})
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "forbidden", code)
	status, code = f.post(t, "/key-ignoring/remove", body, http.Header{"Content-Type": {"text/plain"}})
	require.Equal(t, http.StatusUnsupportedMediaType, status)
	require.Equal(t, "unsupported_media_type", code)
	kept, err := f.store.KeyIgnoringEndpoints(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{charge}, kept, "journal: a refused removal removed it")
}
