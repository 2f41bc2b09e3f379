package httpsyntax

import "testing"

func TestValidHeaderName(t *testing.T) {
	for name, want := range map[string]bool{
		"Idempotency-Key": true, "X-Request-Id": true, "a!#$%&'*+.^_`|~9": true,
		"": false, "Request Id": false, "Key:": false, "Ключ": false, "k\x7f": false, "k\r\n": false, "(k)": false,
	} {
		if got := ValidHeaderName(name); got != want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", name, got, want)
		}
	}
}
