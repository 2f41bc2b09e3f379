package idem_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// Credentials in a query string that url.Values does not show, or under
// names idem did not know, were journaled: a ';' separates parameters for
// servers that still read it as '&' (Go's net/url before 1.17, Python's
// before 3.9.2: golang.org/issue/25192), and url.Values drops the whole
// pair it is in, so ?currency=EUR;api_key=… passed Prepare's check. A
// signed URL's signature is a credential too: whoever holds an AWS SigV4
// presigned URL can make its request until X-Amz-Expires runs out
// (docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html),
// and so with Google Cloud Storage's X-Goog-Signature
// (cloud.google.com/storage/docs/access-control/signed-urls) and an Azure
// SAS token's sig (learn.microsoft.com/en-us/training/modules/
// configure-storage-security/4-identify-uri-sas-parameters). Each is
// refused as api_key is: nothing journaled, nothing sent, the value in
// no error.
func TestQueryCredentialPastSemicolonOrInSignedURLRefused(t *testing.T) {
	const secret = "SECRET_IN_QUERY"
	for name, query := range map[string]string{
		"after a semicolon":              "?currency=EUR;api_key=" + secret,
		"before a semicolon":             "?api_key=" + secret + ";currency=EUR",
		"escaped name after a semicolon": "?currency=EUR;access%5Ftoken=" + secret,
		"AWS SigV4 presigned": "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130721%2Fus-east-1%2Fs3%2Faws4_request" +
			"&X-Amz-Date=20130721T201207Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=" + secret,
		"AWS SigV4 credential alone": "?X-Amz-Credential=" + secret + "%2F20130721%2Fus-east-1%2Fs3%2Faws4_request",
		"Google signed URL": "?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=sa%40p.iam.gserviceaccount.com%2F20190301%2Fauto%2Fstorage%2Fgoog4_request" +
			"&X-Goog-Date=20190301T190859Z&X-Goog-Expires=600&X-Goog-SignedHeaders=host&X-Goog-Signature=" + secret,
		"Azure SAS": "?sv=2015-04-05&sr=b&sp=rw&se=2015-04-30T02%3A23%3A26Z&spr=https&sig=" + secret,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			r := e.req("k", `{}`)
			r.URL += query
			_, err := e.client.Prepare(e.ctx, r)
			require.ErrorIs(t, err, idem.ErrSecretHeader, "URL")
			require.ErrorContains(t, err, "WithRequestHook")
			require.NotContains(t, err.Error(), secret)
			_, err = e.client.Submit(e.ctx, r)
			require.ErrorIs(t, err, idem.ErrSecretHeader, "URL, Submit")

			r = e.req("k", `{}`)
			r.ResultURL = e.srv.URL + "/operations/k" + query
			_, err = e.client.Prepare(e.ctx, r)
			require.ErrorIs(t, err, idem.ErrSecretHeader, "ResultURL")
			require.NotContains(t, err.Error(), secret)

			_, err = e.store.Get(e.ctx, idem.DefaultScope, "k")
			require.ErrorIs(t, err, journal.ErrNotFound, "a refused request is not journaled")
			require.Empty(t, e.srv.Requests(), "a refused request is not sent")
			requireNotInJournalFile(t, e, secret)
		})
	}
}

// The same credentials added by the request hook, at send time as told,
// reached the journal and the log through a Transport's error that quotes
// the URL in a form of its own (its path and query, here): idem looked
// for the values of the sent URL's credentials through url.Values, which
// shows neither a pair after a ';' nor a signature as one.
func TestHookCredentialPastSemicolonOrInSignedURLNotJournaled(t *testing.T) {
	quotingPathAndQuery := func() envOption {
		inner := &http.Client{Transport: &scriptTransport{base: http.DefaultTransport, script: []step{{err: dialRefused}}}}
		return clientOpts(idem.WithHTTPClient(&http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := inner.Do(r)
			if err != nil {
				return nil, fmt.Errorf("%s %s?%s: %w", r.Method, r.URL.Path, r.URL.RawQuery, err)
			}
			return resp, nil
		})}))
	}
	t.Run("after a semicolon", func(t *testing.T) {
		testHookCredentialInURL(t, quotingPathAndQuery(), "?zone=eu", ";", "api_key")
	})
	t.Run("AWS SigV4 presigned", func(t *testing.T) {
		testHookCredentialInURL(t, quotingPathAndQuery(), "?X-Amz-Algorithm=AWS4-HMAC-SHA256", "&", "X-Amz-Signature")
	})
	t.Run("Azure SAS", func(t *testing.T) {
		testHookCredentialInURL(t, quotingPathAndQuery(), "?sv=2015-04-05&sr=b", "&", "sig")
	})
}
