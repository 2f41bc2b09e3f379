// Package httpsyntax holds the HTTP grammar checks that the client and the
// fake server share, so both refuse the same header names.
package httpsyntax

import (
	"net/url"
	"strconv"
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
// apilayer's access_key. A signed URL's signature and credential scope
// are one too: whoever holds the URL can make the request until it
// expires (days, for an AWS SigV4 presigned URL's X-Amz-Signature and
// X-Amz-Credential, docs.aws.amazon.com/AmazonS3/latest/API/
// sigv4-query-string-auth.html; Google Cloud Storage's X-Goog-Signature
// and X-Goog-Credential, cloud.google.com/storage/docs/access-control/
// signed-urls; Alibaba OSS's V4 x-oss-signature and x-oss-credential;
// an Azure SAS token's sig, learn.microsoft.com/en-us/training/modules/
// configure-storage-security/4-identify-uri-sas-parameters). Generic
// names such as "token" or "key" are left alone: a PayPal return URL's
// token is an order id.
var secretParams = [...]string{
	"api_key", "apikey", "api-key", "access_token", "client_secret", "password",
	"subscription-key", "x-amz-security-token", "api_secret", "access_key",
	"x-amz-signature", "x-amz-credential", "x-goog-signature", "x-goog-credential",
	"x-oss-signature", "x-oss-credential", "sig",
}

// SecretParam reports whether a URL query parameter named name (in any
// case) carries an API credential.
func SecretParam(name string) bool {
	for _, p := range secretParams {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// querySeps end a query parameter: '&', and ';', which Go's net/url
// before 1.17, Python's before 3.9.2 and servers still in use read as
// '&' (golang.org/issue/25192). url.Values drops a pair with a ';' in it
// whole, so a secret after one (?a=1;api_key=…) was neither refused nor
// redacted, though such a server reads it as a parameter of its own.
const querySeps = "&;"

// eachParam calls f with the name (unescaped: api%5Fkey is api_key to a
// server) and the value, as written, of each parameter of rawQuery, and
// with the separator before it (none for the first).
func eachParam(rawQuery string, f func(sep, pair, name, value string)) {
	sep := ""
	for rest := rawQuery; ; {
		pair := rest
		i := strings.IndexAny(rest, querySeps)
		if i >= 0 {
			pair = rest[:i]
		}
		name, value, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		f(sep, pair, name, value)
		if i < 0 {
			return
		}
		sep, rest = rest[i:i+1], rest[i+1:]
	}
}

// SecretParamIn returns the name of a secret query parameter
// (SecretParam) of rawQuery, its parameters separated by '&' or ';', or
// "" when it has none.
func SecretParamIn(rawQuery string) string {
	found := ""
	if rawQuery != "" {
		eachParam(rawQuery, func(_, _, name, _ string) {
			if found == "" && SecretParam(name) {
				found = name
			}
		})
	}
	return found
}

// WithoutSecretParams returns rawQuery without its secret parameters
// (SecretParam; separated by '&' or ';'), the others as written and in
// their order, empty ones too: a query with none is returned as it is,
// and "?&a=1&api_key=x" must match the "?&a=1" resubmitted without it.
func WithoutSecretParams(rawQuery string) string {
	if SecretParamIn(rawQuery) == "" {
		return rawQuery
	}
	var b strings.Builder
	kept := false
	eachParam(rawQuery, func(sep, pair, name, _ string) {
		if SecretParam(name) {
			return
		}
		// Counted by pairs, not bytes: an empty first pair is one.
		if kept {
			b.WriteString(sep)
		}
		b.WriteString(pair)
		kept = true
	})
	return b.String()
}

// SecretValues returns the credentials u carries: its user information
// and the values of its secret query parameters (SecretParam; separated
// by '&' or ';'), each as written and unescaped.
func SecretValues(u *url.URL) []string {
	var secrets []string
	if u.User != nil {
		secrets = append(secrets, u.User.Username())
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	if u.RawQuery != "" {
		eachParam(u.RawQuery, func(_, _, name, value string) {
			if !SecretParam(name) {
				return
			}
			secrets = append(secrets, value)
			if v, err := url.QueryUnescape(value); err == nil && v != value {
				secrets = append(secrets, v)
			}
		})
	}
	return secrets
}

// RedactURL returns raw for display, with the values of its secret query
// parameters (SecretParam) and its user information replaced: records
// journaled before the client refused such URLs still hold them. The user
// name goes too, not only the password: Stripe's secret key is the
// basic-auth user name (sk_live_…:@api.stripe.com). The query keeps its
// order and its other parameters as written. A URL that does not parse,
// or holds no secret, is returned as it is.
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
	if q := paramValuesOut("?"+u.RawQuery, "&#")[1:]; q != u.RawQuery {
		u.RawQuery, changed = q, true
	}
	if !changed {
		return raw
	}
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
	return RedactSecretsIn(text)
}

// RedactSecretsIn returns text with each of secrets replaced, in every
// form a URL's text shows it (as given, query- or path-escaped, or
// escaped as %q writes it), and with the value of each secret query
// parameter written in it (?name=value, &name=value or ;name=value)
// replaced too: what a Transport's error or a legacy record shows of a
// URL that carried credentials, in whatever form.
func RedactSecretsIn(text string, secrets ...string) string {
	for _, s := range secrets {
		for _, form := range [...]string{url.QueryEscape(s), url.PathEscape(s), QuotedForm(s), s} {
			if form != "" && strings.Contains(text, form) {
				text = strings.ReplaceAll(text, form, "REDACTED")
			}
		}
	}
	return paramValuesOut(text, paramEnd)
}

// QuotedForm is s as %q writes it, without the quotes.
func QuotedForm(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// paramEnd holds the bytes that end a query parameter's name or value as
// a URL is quoted in an error's text (plainly, or with %q's escapes). Not
// ';': a secret's value runs past one, as a server that does not read it
// as '&' takes it; the text after it is redacted with the secret.
const paramEnd = "&?#\"\\ \t\r\n"

// paramValuesOut returns text with the value of each secret query
// parameter written in it (after '?', '&' or ';', up to '=') replaced, the
// value running to the first of ends.
func paramValuesOut(text, ends string) string {
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; i < len(text); i++ {
		if text[i] != '?' && strings.IndexByte(querySeps, text[i]) < 0 {
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
		for end < len(text) && strings.IndexByte(ends, text[end]) < 0 {
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
