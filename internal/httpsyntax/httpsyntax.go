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

// credentialHeaders carry credentials by their names: the standard ones
// and the most common custom ones.
var credentialHeaders = [...]string{"Authorization", "Cookie", "Set-Cookie", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Auth-Token"}

// credentialEndings end the names of headers that carry an API's own
// credential: KuCoin's KC-API-KEY and KC-API-PASSPHRASE, OKX's
// OK-ACCESS-PASSPHRASE, Binance's X-MBX-APIKEY, Plaid's PLAID-SECRET,
// Shopify's X-Shopify-Access-Token, AWS's X-Amz-Security-Token, Azure API
// Management's Ocp-Apim-Subscription-Key, Cloudflare's X-Auth-Key,
// Alpaca's APCA-API-KEY-ID (sent beside its secret, no signature). The
// ending, not any part: KC-API-KEY-VERSION says which kind of key, and is
// none.
var credentialEndings = [...]string{
	"apikey", "api-key", "api_key", "api-key-id", "access-key", "auth-key", "subscription-key",
	"secret", "passphrase", "password", "token", "cookie", "authorization",
}

// credentialWords, as a whole part of a name (between hyphens or
// underscores) anywhere in it, say it carries a credential whatever it
// ends in: Alpaca's APCA-API-SECRET-KEY, Kushki's Private-Merchant-Id.
var credentialWords = [...]string{"secret", "private"}

// CredentialHeader reports whether a header named name (in any case)
// carries a credential, by the standard names or by an ending API
// credentials' names share.
func CredentialHeader(name string) bool {
	if NamedCredentialHeader(name) {
		return true
	}
	// An idempotency key's header is none, however it ends (Twilio's
	// I-Twilio-Idempotency-Token): the advice to add credentials in a hook
	// would have the key made afresh on every resend. Looked for only in
	// a name shaped as a credential's: most names are not.
	return credentialShaped(name) && !containsFold(name, "idempot")
}

// credentialShaped reports whether name ends as credentials' names do, or
// has a credential word as a whole part.
func credentialShaped(name string) bool {
	for _, e := range credentialEndings {
		if len(name) >= len(e) && strings.EqualFold(name[len(name)-len(e):], e) {
			return true
		}
	}
	for rest := name; rest != ""; {
		part := rest
		if i := strings.IndexAny(rest, "-_"); i >= 0 {
			part, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		for _, w := range credentialWords {
			if strings.EqualFold(part, w) {
				return true
			}
		}
	}
	return false
}

// containsFold reports whether s contains sub (lower case ASCII) in any
// case, without allocating: CredentialHeader runs on every submit.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// NamedCredentialHeader reports whether name (in any case) is one of the
// standard or common credential headers, which a request hook or
// Transport sets: such a header cannot carry an idempotency key. An
// ending is no reason there: Twilio's key header is
// I-Twilio-Idempotency-Token.
func NamedCredentialHeader(name string) bool {
	for _, c := range credentialHeaders {
		if strings.EqualFold(name, c) {
			return true
		}
	}
	return false
}

// secretParams are query parameter names (lower case) that carry an API
// credential: besides the common ones, Azure API Management's
// subscription-key, AWS SigV4's session token, Vonage's api_secret and
// apilayer's access_key. Generic names such as "token" or "key" are left
// alone: a PayPal return URL's token is an order id.
var secretParams = [...]string{
	"api_key", "apikey", "api-key", "access_token", "client_secret", "password",
	"subscription-key", "x-amz-security-token", "api_secret", "access_key",
}

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
// URL holds it there too. So does one journaled by a release that quoted
// the URL as sent, with what the request hook added to its query string
// (?api_key=…): the value of any secret query parameter (SecretParam) in
// text is replaced as well.
func RedactURLsIn(text string, urls ...string) string {
	for _, raw := range urls {
		if raw == "" || !strings.Contains(text, raw) {
			continue
		}
		if r := RedactURL(raw); r != raw {
			text = strings.ReplaceAll(text, raw, r)
		}
	}
	return secretParamValuesOut(text)
}

// paramEnd holds the bytes that end a query parameter's name or value as
// a URL is quoted in an error's text (plainly, or with %q's escapes).
const paramEnd = "&?#\"\\ \t\r\n"

// secretParamValuesOut returns text with the value of each secret query
// parameter written in it (?name=value or &name=value) replaced.
func secretParamValuesOut(text string) string {
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; i < len(text); i++ {
		if text[i] != '?' && text[i] != '&' {
			continue
		}
		eq := strings.IndexByte(text[i+1:], '=')
		if eq < 0 {
			break
		}
		name := text[i+1 : i+1+eq]
		if strings.ContainsAny(name, paramEnd) {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n // api%5Fkey is api_key to the server
		}
		if !SecretParam(name) {
			continue
		}
		start := i + 1 + eq + 1
		end := start
		for end < len(text) && strings.IndexByte(paramEnd, text[end]) < 0 {
			end++
		}
		if text[start:end] == "REDACTED" {
			continue
		}
		b.WriteString(text[done:start])
		b.WriteString("REDACTED")
		done, i = end, end-1
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}
