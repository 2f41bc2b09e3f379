package httpsyntax

import (
	"slices"
	"testing"
)

// The values a request hook added to the query are blanked in what is
// recorded of the answer (a Google key=): a journaled parameter the hook
// only re-encoded or moved (a signer sorting and re-encoding the query
// with url.Values.Encode, as Huobi's and Binance's signing asks) is no
// credential, and blanking it would turn the answer's own copy of it (a
// client order id echoed back) into REDACTED in Result.Body.
func TestAddedParamValues(t *testing.T) {
	for _, tt := range []struct {
		before, after string
		want          []string
	}{
		{"", "", nil},
		{"expand=items", "expand=items", nil},
		{"", "key=AIzaSyFAKE", []string{"AIzaSyFAKE"}},
		{"expand=items", "expand=items&key=AIzaSyFAKE", []string{"AIzaSyFAKE"}},
		// Re-encoded and reordered by a signer: nothing added but the
		// signature and its timestamp.
		{"symbol=BTCUSDT&newClientOrderId=order:1 a", "newClientOrderId=order%3A1+a&symbol=BTCUSDT&timestamp=1700000000123&signature=c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71",
			[]string{"1700000000123", "c8db56825ae71d6d79447849e617115f4a920fa2acdcab2b053c4b2838bd6b71"}},
		// A journaled placeholder the hook replaces: the new value.
		{"key=PLACEHOLDER", "key=AIzaSy%2Fb", []string{"AIzaSy%2Fb", "AIzaSy/b"}},
		// A value-less flag is nothing to blank.
		{"", "pretty", nil},
		// Flags and versions are no credential: blanked, every true, 1
		// or 2 of the answer's JSON went with them.
		{"expand=items", "expand=items&sandbox=true&v=1&SignatureVersion=2", nil},
	} {
		if got := AddedParamValues(tt.before, tt.after); !slices.Equal(got, tt.want) {
			t.Errorf("AddedParamValues(%q, %q) = %q, want %q", tt.before, tt.after, got, tt.want)
		}
	}
}
