package main

// What the tool prints never includes a credential.

import (
	"context"
	"crypto/sha256"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestShowRedactsEveryCredentialHeader: format.go promises that
// the credential headers the client refuses to journal are redacted all
// the same if a record holds one (written by another tool, an older
// version, or straight through package journal). Its list had only
// Authorization, Cookie, Proxy-Authorization and Set-Cookie; the client
// refuses X-Api-Key, Api-Key and X-Auth-Token too, and show / list -json
// printed those in clear. An API's own credential header (KuCoin's
// KC-API-PASSPHRASE, OKX's OK-ACCESS-PASSPHRASE, Binance's X-MBX-APIKEY,
// Plaid's PLAID-SECRET, Shopify's X-Shopify-Access-Token, Azure API
// Management's Ocp-Apim-Subscription-Key) was journaled by releases that
// refused only the names above, and printed to the terminal or the CI log
// show and list -json run in; a name that merely contains a credential
// word (KC-API-KEY-VERSION) is printed.
func TestShowRedactsEveryCredentialHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payments.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	now := time.Now()
	body := []byte(orderBody)
	_, err = s.Create(context.Background(), &journal.Record{
		// A URL with an API key in its query, journaled before the
		// client refused them, was printed whole too.
		Scope: "default", Key: "k-secret", Method: "POST", URL: "https://api.example.com/v1/orders?api_key=sk_live_query&region=eu",
		QueryURL: "https://u:sk_live_password@api.example.com/v1/orders/k-secret?Access_Token=sk_live_token",
		Header: http.Header{
			"X-Api-Key":    {"sk_live_xapikey"},
			"Api-Key":      {"sk_live_apikey"},
			"X-Auth-Token": {"sk_live_authtoken"},
			"Content-Type": {"application/json"},

			"Kc-Api-Key":                {"sk_live_kc_key"},
			"Kc-Api-Passphrase":         {"sk_live_kc_passphrase"},
			"Ok-Access-Passphrase":      {"sk_live_okx_passphrase"},
			"X-Mbx-Apikey":              {"sk_live_binance_key"},
			"Plaid-Secret":              {"sk_live_plaid_secret"},
			"X-Shopify-Access-Token":    {"sk_live_shopify_token"},
			"Ocp-Apim-Subscription-Key": {"sk_live_apim_key"},
			"Kc-Api-Key-Version":        {"2"},
		},
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown,
		Created: now, Updated: now,
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	requireRedacted(t, path, "application/json", "region=eu", "Kc-Api-Key-Version")
}

// requireRedacted runs show, show -json and list -json on the journal at
// path (holding k-secret): each prints want and no sk_live credential.
func requireRedacted(t *testing.T, path string, want ...string) {
	t.Helper()
	for _, args := range [][]string{{"show", "k-secret"}, {"show", "-json", "k-secret"}, {"list", "-json"}} {
		stdout, stderr, code := runIdem(t, append(args, "-journal", path)...)
		require.Equal(t, 0, code, stderr)
		for _, w := range want {
			require.Contains(t, stdout, w, "idem %q", args)
		}
		require.NotContains(t, stdout, "sk_live", "idem %q printed a credential", args)
	}
}

// TestBadURLFlagDoesNotEchoItsPassword: a mistyped -url (a wrong scheme,
// a bad escape) was quoted whole in the usage error, with the password
// it carries: printed to a terminal or a CI log.
func TestBadURLFlagDoesNotEchoItsPassword(t *testing.T) {
	for _, u := range []string{
		"htps://admin:PLANTED_PASSWORD@svc.internal/idem/",
		"https://admin:PLANTED_PASSWORD@svc.internal/idem/%zz",
		"https://admin:PLANTED_PASSWORD@/idem/",
	} {
		_, stderr, code := runIdem(t, "list", "-url", u)
		require.Equal(t, 2, code, stderr)
		require.Contains(t, stderr, "-url")
		require.NotContains(t, stderr, "PLANTED_PASSWORD", "idem list -url %q", u)
	}
}

// TestAttemptErrorRedactsTheURLItQuotes: net/http's transport errors quote
// the request URL (Post "https://…": connection reset by peer), and an
// attempt's journaled error text kept it whole: a record journaled before
// the client refused secret query parameters printed its API key in the
// timeline while the request line beside it was redacted.
func TestAttemptErrorRedactsTheURLItQuotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payments.journal")
	s, err := journal.Open(path)
	require.NoError(t, err)
	now := time.Now()
	body := []byte(orderBody)
	u := "https://api.example.com/v1/orders?api_key=sk_live_query&region=eu"
	_, err = s.Create(context.Background(), &journal.Record{
		Scope: "default", Key: "k-secret", Method: "POST", URL: u,
		Body: body, BodySHA: sha256.Sum256(body), State: journal.StateUnknown, Created: now, Updated: now,
		Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: now, Wrote: true, Done: true,
			Err: `Post "` + u + `": read tcp 127.0.0.1:4242: connection reset by peer`}},
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	requireRedacted(t, path, "connection reset by peer", "region=eu")
}
