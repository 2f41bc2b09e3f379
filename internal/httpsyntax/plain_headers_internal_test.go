package httpsyntax

import (
	"net/http"
	"testing"
)

// CredentialHeader answers the names nearly every request carries by a
// switch before its rules: it must answer every name as the rules do, the
// switch's ones, any other spelling of them, and those of credentials.
func TestPlainHeadersAreNoCredentials(t *testing.T) {
	names := []string{
		// The switch's, each of which must be no credential by the rules.
		"Content-Type", "Content-Length", "Accept", "Accept-Encoding", "Accept-Language",
		"User-Agent", "Cache-Control", "Idempotency-Key", "X-Idempotency-Key", "X-Request-Id",
		// Others, credentials' among them.
		"Authorization", "X-Api-Key", "Cookie", "Kc-Api-Passphrase", "Apca-Api-Secret-Key",
		"I-Twilio-Idempotency-Token", "Stripe-Account", "Date", "If-Match", "Accept-Token",
	}
	for _, name := range names {
		for _, n := range []string{name, http.CanonicalHeaderKey(name), lower(name)} {
			if got, want := CredentialHeader(n), credentialHeader(n); got != want {
				t.Errorf("CredentialHeader(%q) = %v; its rules say %v", n, got, want)
			}
		}
	}
	for _, name := range names[:10] {
		if credentialHeader(name) {
			t.Errorf("%q is in CredentialHeader's switch of plain names, but its rules call it a credential", name)
		}
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
