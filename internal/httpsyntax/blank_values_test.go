package httpsyntax

import (
	"net/url"
	"testing"
)

// A short credential (a sandbox key "test", a Basic user "a") was
// blanked in every word that held it, which left a journaled reason
// unreadable ("REDACTEDing", "l REDACTED"), or, for a hook's Basic user
// under eight bytes, not at all. It is blanked where it stands as a word,
// however the text quotes it; a long one wherever it is.
func TestRedactSecretsInShortSecretAsAWord(t *testing.T) {
	for _, tc := range []struct {
		text    string
		secrets []string
		want    string
	}{
		{"a card was declined for a reason", []string{"a"}, "REDACTED card was declined for REDACTED reason"},
		{"testing the latest sk_test_key: test", []string{"test"}, "testing the latest sk_test_key: REDACTED"},
		{`user "test" refused, user=test, test:pw`, []string{"test"}, `user "REDACTED" refused, user=REDACTED, REDACTED:pw`},
		// Escaped before it: a URL's %3D, a quoted string's \n and \u0026.
		{`api_key%3Dtest%26x`, []string{"test"}, `api_key%3DREDACTED%26x`},
		{`line\ntest and \u0026test`, []string{"test"}, `line\nREDACTED and \u0026REDACTED`},
		// A secret that ends in a byte of no word joins the next one.
		{"key ab=cd", []string{"ab="}, "key REDACTEDcd"},
		{"sk_live_LONG_SECRET_VALUEsuffix", []string{"sk_live_LONG_SECRET_VALUE"}, "REDACTEDsuffix"},
		// Cut to a bound through a quoted key, its start ends the text.
		{"401: Key sk_live_LONG_SEC", []string{"sk_live_LONG_SECRET_VALUE"}, "401: Key REDACTED"},
		{"401: Key sk_l", []string{"sk_live_LONG_SECRET_VALUE"}, "401: Key REDACTED"},
		{"401: Key sk_", []string{"sk_live_LONG_SECRET_VALUE"}, "401: Key sk_"},
		{"401: Authorization must start with Bearer", []string{"Bearer tok_LONG_TOKEN"}, "401: Authorization must start with Bearer"},
		// The longer goes first: one holding another is blanked whole.
		{"key test_key_x", []string{"test", "test_key_x"}, "key REDACTED"},
		{"nothing of it", []string{"a", "test"}, "nothing of it"},
		// PHP's json_encode writes '/' as "\/" unless told
		// JSON_UNESCAPED_SLASHES (php.net/manual/en/json.constants.php).
		{`{"error":"bad token 8Gk2\/xQ9vLm3Zp7\/Rt4W"}`, []string{"8Gk2/xQ9vLm3Zp7/Rt4W"}, `{"error":"bad token REDACTED"}`},
		{`{"error":"bad key k\/1"}`, []string{"k/1"}, `{"error":"bad key REDACTED"}`},
	} {
		if got := RedactSecretsIn(tc.text, tc.secrets...); got != tc.want {
			t.Errorf("RedactSecretsIn(%q, %q) = %q, want %q", tc.text, tc.secrets, got, tc.want)
		}
	}
}

// A secret query parameter's value was cut at a ';', as a server that
// reads ';' as '&' takes it: one that does not reads, and quotes, the
// value up to the next '&', and its part past the ';' was left in the
// text.
func TestSecretValuesPastSemicolon(t *testing.T) {
	u, err := url.Parse("https://h/o?zone=eu&api_key=sk_live_QRY;rest_OF_THE_KEY&n=1;sig=s%2B1;x=2")
	if err != nil {
		t.Fatal(err)
	}
	secrets := SecretValues(u)
	for text, want := range map[string]string{
		"invalid api_key value sk_live_QRY;rest_OF_THE_KEY": "invalid api_key value REDACTED",
		"invalid api_key value sk_live_QRY":                 "invalid api_key value REDACTED",
		"signature s+1;x=2 expired":                         "signature REDACTED expired",
		"signature s+1 expired":                             "signature REDACTED expired",
		"zone eu, n 1":                                      "zone eu, n 1",
	} {
		if got := RedactSecretsIn(text, secrets...); got != want {
			t.Errorf("RedactSecretsIn(%q, %q) = %q, want %q", text, secrets, got, want)
		}
	}
}
