// Package httpsyntax holds the HTTP grammar checks that the client and the
// fake server share, so both refuse the same header names.
package httpsyntax

import (
	"net/url"
	"slices"
	"strings"
)

// ValidHeaderName reports whether name is an RFC 9110 token, the only
// thing net/http will send as a header field name.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b <= ' ' || b >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, b) >= 0 {
			return false
		}
	}
	return true
}

// secretParams are query parameter names (lower case) that carry an API
// credential. Generic names such as "token" or "key" are left alone: a
// PayPal return URL's token is an order id.
var secretParams = [...]string{"api_key", "apikey", "api-key", "access_token", "client_secret", "password"}

// SecretParam reports whether a URL query parameter named name (in any
// case) carries an API credential.
func SecretParam(name string) bool {
	return slices.Contains(secretParams[:], strings.ToLower(name))
}

// RedactURL returns raw for display, with the values of its secret query
// parameters (SecretParam) and its user information replaced: records
// journaled before the client refused such URLs still hold them. The user
// name goes too, not only the password: Stripe's secret key is the
// basic-auth user name (sk_live_…:@api.stripe.com). A URL that does not
// parse, or holds no secret, is returned as it is.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword("REDACTED", "REDACTED")
		} else {
			u.User = url.User("REDACTED")
		}
		changed = true
	}
	q := u.Query()
	for name := range q {
		if SecretParam(name) {
			q[name] = []string{"REDACTED"}
			changed = true
		}
	}
	if !changed {
		return raw
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// RedactURLsIn returns text with each of urls in it replaced by its
// RedactURL form: a journaled attempt's error quotes the URL it was sent
// to (net/http's Post "…": …), and a record that holds a secret in its
// URL holds it there too.
func RedactURLsIn(text string, urls ...string) string {
	for _, raw := range urls {
		if raw == "" || !strings.Contains(text, raw) {
			continue
		}
		if r := RedactURL(raw); r != raw {
			text = strings.ReplaceAll(text, raw, r)
		}
	}
	return text
}
