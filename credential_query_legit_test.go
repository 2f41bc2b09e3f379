package idem_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// The query walker that reads ';' as a separator (so that a credential
// after one is refused) must not refuse or change a query that carries
// none: a ';' inside a value (a filter, a list), a separator or '='
// percent-encoded inside a value, and generic names that only look like
// a credential's (signature_version, sig_alg, a PayPal return URL's
// token, key). Each is journaled and sent byte for byte as given, once.
func TestQueryWithoutCredentialPastSemicolonSentAsGiven(t *testing.T) {
	for name, query := range map[string]string{
		"semicolon in a value":         "filter=status:paid;currency:EUR&limit=10",
		"semicolon list":               "ids=1;2;3",
		"encoded separator in a value": "note=a%3Bapi_key%3Dx&b=%26sig%3D1",
		"names like a credential's":    "signature_version=2&sig_alg=hs256&token=EC-8R1234&key=k1;signature=pending",
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []string
			e := newEnv(t, clientOpts(idem.WithRequestHook(func(r *http.Request) error {
				mu.Lock()
				defer mu.Unlock()
				if r.Method != http.MethodGet {
					sent = append(sent, r.URL.RawQuery)
				}
				return nil
			})))
			r := e.req("k", `{"amount":1}`)
			r.URL += "?" + query
			res, err := e.client.Submit(e.ctx, r)
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, r.URL, e.record("k").URL, "journaled URL")
			require.Len(t, e.submits("k"), 1, "submits")
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []string{query}, sent, "query as sent")
		})
	}
}
