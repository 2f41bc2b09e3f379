package idem

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// TestEndpointNameHoldsNoCredentials: an endpoint learnt to ignore the key
// is journaled (KeyIgnoringStore) and logged under this name, and kept
// until an operator drops it. A record journaled before URLs with
// credentials were refused (or straight through package journal) may
// carry a user:password; its name carried it too. The query and fragment
// were already left out.
func TestEndpointNameHoldsNoCredentials(t *testing.T) {
	for url, want := range map[string]string{
		"https://api.example.com/v1/payments?token=s3cr3t#x":        "POST https://api.example.com/v1/payments",
		"https://merchant:s3cr3t@api.example.com/v1/payments":       "POST https://api.example.com/v1/payments",
		"https://merchant:s3cr3t@api.example.com":                   "POST https://api.example.com",
		"https://merchant:p@ss@api.example.com/v1/pay?x=1":          "POST https://api.example.com/v1/pay",
		"https://api.example.com/v1/users/a@b.example/payments":     "POST https://api.example.com/v1/users/a@b.example/payments",
		"http://127.0.0.1:8080/orders":                              "POST http://127.0.0.1:8080/orders",
		"https://merchant@api.example.com:8443/v1/payments/pay_1/x": "POST https://api.example.com:8443/v1/payments/pay_1/x",
	} {
		got := endpoint(&journal.Record{Method: "POST", URL: url})
		require.Equal(t, want, got, url)
		require.NotContains(t, got, "s3cr3t", url)
	}
}
