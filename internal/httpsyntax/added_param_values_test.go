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
		{"symbol=BTCUSDT&newClientOrderId=order:1 a", "newClientOrderId=order%3A1+a&symbol=BTCUSDT&timestamp=1700000000123&signature=9f86d0",
			[]string{"1700000000123", "9f86d0"}},
		// A journaled placeholder the hook replaces: the new value.
		{"key=PLACEHOLDER", "key=AIza%2Fb", []string{"AIza%2Fb", "AIza/b"}},
		// A value-less flag is nothing to blank.
		{"", "pretty", nil},
	} {
		if got := AddedParamValues(tt.before, tt.after); !slices.Equal(got, tt.want) {
			t.Errorf("AddedParamValues(%q, %q) = %q, want %q", tt.before, tt.after, got, tt.want)
		}
	}
}
