package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// An operator's browser, signed in to the service, visits another site.
// That site cannot read the handler's answers (no CORS), but it can make
// the browser send a POST with the operator's cookies, as long as the
// request is a "simple" one: a form (enctype text/plain renders
// name=value, so the name `{"key":…,"reason":"a` and the value `b"}` make
// a JSON object) or a no-cors fetch with a text/plain body. Settling a
// payment as failed by hand invites the caller to charge again under a
// new key: a duplicate charge from one click. Such a request must change
// nothing, whatever authentication middleware (cookie-based) let it in.
func TestResolveRefusesCrossSiteRequests(t *testing.T) {
	forged := `{"key":"lost","state":"failed","by":"attacker","reason":"a=b"}`
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
		code   string
	}{
		{"text/plain form from another site", http.Header{
			"Content-Type": {"text/plain"}, "Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"},
		}, http.StatusForbidden, "forbidden"},
		{"form without fetch metadata (an older browser)", http.Header{
			"Content-Type": {"text/plain"}, "Origin": {"https://evil.example"},
		}, http.StatusForbidden, "forbidden"},
		{"urlencoded form from a sibling subdomain", http.Header{
			"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-site"},
		}, http.StatusForbidden, "forbidden"},
		// application/json cannot be sent cross-site without a CORS
		// preflight, unless a middleware answers preflights too freely.
		{"JSON from another site", http.Header{
			"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"cross-site"},
		}, http.StatusForbidden, "forbidden"},
		// Not a browser, or not JSON: refused as a body the handler does
		// not read, so that a body a form can make is never acted on.
		{"plain text from a script", http.Header{"Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"no content type", http.Header{}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			status, code := f.post(t, "/resolve", forged, tc.header)
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.code, code)
			rec, err := f.store.Get(context.Background(), idem.DefaultScope, "lost")
			require.NoError(t, err)
			require.Equal(t, idem.StateUnknown, rec.State, "a refused resolve changed the operation")
			require.Nil(t, rec.Resolved)
		})
	}
}

// The operator's own pages, the idem command and scripts still resolve.
func TestResolveAcceptsSameOriginJSON(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"the idem command", http.Header{"Content-Type": {"application/json"}}},
		{"with a charset", http.Header{"Content-Type": {"application/json; charset=utf-8"}}},
		{"a same-origin page", http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"same-origin"}}},
		{"typed in the address bar's tools", http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"none"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			status, code := f.post(t, "/resolve", `{"key":"lost","state":"failed","by":"alice","reason":"refunded"}`, tc.header)
			require.Equal(t, http.StatusOK, status, code)
			rec, err := f.store.Get(context.Background(), idem.DefaultScope, "lost")
			require.NoError(t, err)
			require.Equal(t, idem.StateFailed, rec.State)
		})
	}
}

// post sends body to the handler with header, and returns the status and
// the error code of the answer ("" for a success).
func (f *fixture) post(t *testing.T, path, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.admin.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Cookie", "session=operator")
	resp, err := f.admin.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &e), "%s", b)
	if e.Error.Code != "" {
		require.NotEmpty(t, e.Error.Message, "an error must say what to do")
	}
	return resp.StatusCode, e.Error.Code
}
