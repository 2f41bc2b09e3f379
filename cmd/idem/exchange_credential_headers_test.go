package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// The client refuses to journal the credential headers it knows by name
// (Authorization, X-Api-Key, …); an API's own credential header is
// journaled as any other. KuCoin's and OKX's REST APIs take a key and a
// passphrase in KC-API-KEY / KC-API-PASSPHRASE and OK-ACCESS-KEY /
// OK-ACCESS-PASSPHRASE, Binance's its key in X-MBX-APIKEY, Plaid its
// secret in PLAID-SECRET, Shopify's Admin API a token in
// X-Shopify-Access-Token, Azure API Management a key in
// Ocp-Apim-Subscription-Key: a service that set them on the Request
// rather than in a request hook had show and list -json print them to
// the terminal or the CI log they run in. A header whose name says it
// holds a credential is redacted as the known ones are.
func TestShowRedactsHeadersNamedAsCredentials(t *testing.T) {
	fx := newJournal(t)
	c, err := idem.Open(fx.path)
	require.NoError(t, err)
	_, err = c.Prepare(context.Background(), idem.Request{
		Key: "k-secret", URL: "https://api.kucoin.example/api/v1/orders", Body: []byte(orderBody),
		Header: http.Header{
			"KC-API-KEY":                {"sk_live_kc_key"},
			"KC-API-PASSPHRASE":         {"sk_live_kc_passphrase"},
			"OK-ACCESS-PASSPHRASE":      {"sk_live_okx_passphrase"},
			"X-MBX-APIKEY":              {"sk_live_binance_key"},
			"PLAID-SECRET":              {"sk_live_plaid_secret"},
			"X-Shopify-Access-Token":    {"sk_live_shopify_token"},
			"Ocp-Apim-Subscription-Key": {"sk_live_apim_key"},
			"X-Request-Id":              {"req-42"},
			"KC-API-KEY-VERSION":        {"2"},
		},
	})
	require.NoError(t, err, "the client journals these headers")
	require.NoError(t, c.Close())

	requireRedacted(t, fx.path, "req-42", "Kc-Api-Key-Version", "application/json")
}
