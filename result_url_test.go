package idem_test

// The result endpoint is derived from the key: each test checks that the
// result URL names the operation's own key, whatever the key holds and
// wherever the template puts it.

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// Key placement / result endpoint: the result URL is "derived from the
// key". A legal key of "." or ".." (checkName accepts any visible ASCII)
// is dot-segment-resolved away by url.ResolveReference, so the result
// query went to another resource (the collection, or the API root). A 2xx
// there with any "id" field decoded as succeeded: a lost order.
func TestDotKeysKeepTheirResultURL(t *testing.T) {
	for _, key := range []string{".", ".."} {
		t.Run(key, func(t *testing.T) {
			e := newEnv(t)
			op, err := e.client.Prepare(e.ctx, e.req(key, `{}`))
			if errors.Is(err, idem.ErrInvalidRequest) {
				return // rejecting such keys is a fine fix too
			}
			require.NoError(t, err)
			prefix := e.srv.URL + "/operations/"
			require.True(t, strings.HasPrefix(op.ResultURL, prefix) && len(op.ResultURL) > len(prefix),
				"key %q queries %q, not its own result", key, op.ResultURL)
		})
	}
}

// The result endpoint is "derived from the key". In a template whose
// {key} sits in the query string, a path-escaped key keeps '+', '&' and
// '=' (base64 keys have them): the server reads another key ('+' is a
// space there, '&' starts another parameter) and answers for the wrong
// operation, or 404 for ever.
func TestResultTemplateQueryEscapesKey(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithResultEndpoint("/operations?key={key}&v=1")))
	for _, key := range []string{"ab+cd/ef==", "a&key=b", "x?y#z"} {
		op, err := e.client.Prepare(e.ctx, e.req(key, `{}`))
		require.NoError(t, err)
		u, err := url.Parse(op.ResultURL)
		require.NoError(t, err)
		require.Equal(t, "/operations", u.Path)
		require.Equal(t, []string{key}, u.Query()["key"], op.ResultURL)
		require.Equal(t, "1", u.Query().Get("v"))
	}
	// A key in the path is still path-escaped.
	e2 := newEnv(t)
	op, err := e2.client.Prepare(e2.ctx, e2.req("ab+cd/ef==", `{}`))
	require.NoError(t, err)
	require.Equal(t, e2.srv.URL+"/operations/ab+cd%2Fef==", op.ResultURL)
}

// The result endpoint is "derived from the key". The query-escaping change
// looked at the first {key} only: in "/operations/{key}?echo={key}" the
// second one, in the query string, was path-escaped, so the server read
// "a b" for "a+b" and "a" plus another parameter for "a&x=y".
func TestResultTemplateEscapesEachKeyForItsPart(t *testing.T) {
	e := newEnv(t, clientOpts(idem.WithResultEndpoint("/operations/{key}?echo={key}&v=1")))
	for _, key := range []string{"a+b", "a&x=y", "ab+cd/ef==", "x?y#z", "p%2Fq"} {
		op, err := e.client.Prepare(e.ctx, e.req(key, `{}`))
		require.NoError(t, err)
		u, err := url.Parse(op.ResultURL)
		require.NoError(t, err)
		require.Equal(t, "/operations/"+key, u.Path, op.ResultURL)
		require.Equal(t, []string{key}, u.Query()["echo"], op.ResultURL)
		require.Equal(t, "1", u.Query().Get("v"), op.ResultURL)
		require.Empty(t, u.Fragment, op.ResultURL)
	}
}
