// Package httpsyntax holds the HTTP grammar checks that the client and the
// fake server share, so both refuse the same header names.
package httpsyntax

import (
	"bytes"
	"net/url"
	"slices"
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
	// The names nearly every request carries, as net/http and idem spell
	// them, are none: one switch instead of credentialHeader's 22
	// case-folded comparisons, for each header of every send and Submit
	// (TestPlainHeadersAreNoCredentials).
	switch name {
	case "Content-Type", "Content-Length", "Accept", "Accept-Encoding", "Accept-Language",
		"User-Agent", "Cache-Control", "Idempotency-Key", "X-Idempotency-Key", "X-Request-Id":
		return false
	}
	return credentialHeader(name)
}

// credentialHeader is CredentialHeader by its rules alone.
func credentialHeader(name string) bool {
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
// and the values of its secret query parameters (SecretParam), each as
// written and unescaped. A value with a ';' in it is given both cut at
// the ';' and whole up to the next '&': a server that reads ';' as '&'
// takes the first, one that does not (Go's net/url since 1.17 drops the
// pair, others keep it) the second, and quotes it so.
func SecretValues(u *url.URL) []string {
	var secrets []string
	if u.User != nil {
		secrets = append(secrets, u.User.Username())
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	add := func(value string) {
		secrets = append(secrets, value)
		if v, err := url.QueryUnescape(value); err == nil && v != value {
			secrets = append(secrets, v)
		}
	}
	if u.RawQuery == "" {
		return secrets
	}
	for _, pair := range strings.Split(u.RawQuery, "&") {
		// Each parameter of pair, read as one past a ';' too.
		for off := 0; off <= len(pair); {
			param, next := pair[off:], len(pair)
			if i := strings.IndexByte(param, ';'); i >= 0 {
				param, next = param[:i], off+i
			}
			raw, value, hasValue := strings.Cut(param, "=")
			name := raw
			if n, err := url.QueryUnescape(raw); err == nil {
				name = n
			}
			if hasValue && SecretParam(name) {
				add(value)
				if whole := pair[off+len(raw)+1:]; whole != value {
					add(whole)
				}
			}
			off = next + 1
		}
	}
	return secrets
}

// AddedParamValues returns the values of the query parameters of after
// (separated by '&' or ';') that before does not hold with the same
// value, each as written and unescaped: a request hook adds a credential
// under a name of the API's own there (Google's key=), which SecretValues
// does not know. Pairs are compared unescaped, so a hook that re-encodes
// or reorders the journaled query (a signer's url.Values.Encode) adds
// none of them. A value shorter than minAnywhere is none either: a hook
// adds flags and versions too (sandbox=true, v=1, HTX's
// SignatureVersion=2), and blanked as words they took every true, 1 or 2
// of the answer's JSON with them. No credential is that short.
func AddedParamValues(before, after string) []string {
	if after == before || after == "" {
		return nil
	}
	had := map[[2]string]bool{}
	unescaped := func(v string) string {
		if u, err := url.QueryUnescape(v); err == nil {
			return u
		}
		return v
	}
	eachParam(before, func(_, _, name, value string) { had[[2]string{name, unescaped(value)}] = true })
	var values []string
	eachParam(after, func(_, _, name, value string) {
		v := unescaped(value)
		if len(v) < minAnywhere || had[[2]string{name, v}] {
			return
		}
		values = append(values, value)
		if v != value {
			values = append(values, v)
		}
	})
	return values
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

// RedactSecretsIn returns text with each of secrets blanked
// (BlankValues), and with the value of each secret query parameter
// written in it (?name=value, &name=value or ;name=value) replaced too:
// what a Transport's error or a legacy record shows of a URL that
// carried credentials, in whatever form.
func RedactSecretsIn(text string, secrets ...string) string {
	return paramValuesOut(BlankValues(text, secrets...), paramEnd)
}

// minAnywhere is the length from which a secret is blanked wherever its
// text is found. A shorter one (a sandbox key "test", a Basic user "a")
// is found inside words a person must read ("testing", every "a"), and
// is blanked where it stands as a word of its own: that is how a server
// or an error quotes a value, after a space, a quote, '=' or ':', or an
// escape (%3D, \n, \u0026). A long one is never a word's part by chance.
const minAnywhere = 8

// minTail is the shortest start of a secret blanked at the end of text:
// a reason or an error is cut to a bound (512 bytes, 1024), and a cut
// through a quoted secret leaves its start there. Up to three bytes of it
// may stay, as Stripe shows the last four of a refused key.
const minTail = 4

// BlankValues returns text with each of secrets replaced by REDACTED in
// every form text may show it (valueForms: as given, query- or
// path-escaped, or escaped as %q or a JSON encoder writes it): one of
// minAnywhere bytes or more wherever it is found, a shorter one where it
// stands as a word, and the start of one (minTail bytes or more) that
// ends text. The longest secret goes first, so that one holding another
// is blanked whole.
func BlankValues(text string, secrets ...string) string {
	if len(secrets) == 0 || text == "" {
		return text
	}
	return NewValues(secrets...).Blank(text)
}

// Values are secrets in the forms a text may show them, worked out once
// for the several texts of one exchange (its body, its error, a reason):
// BlankValues works them out on every call.
type Values struct{ forms []string }

// NewValues returns secrets' Values.
func NewValues(secrets ...string) Values {
	return Values{forms: valueForms(secrets)}
}

// Blank is BlankValues with v's secrets.
func (v Values) Blank(text string) string {
	if len(v.forms) == 0 || text == "" {
		return text
	}
	for _, form := range v.forms {
		if strings.Contains(text, form) {
			text = blankForm(text, form)
		}
	}
	for _, form := range v.forms {
		if len(form) > minTail {
			text = blankTail(text, form)
		}
	}
	return text
}

// MayHold reports whether Blank could find any of v's secrets in b:
// false says b is to be kept as it is, with no copy of it made.
func (v Values) MayHold(b []byte) bool {
	for _, form := range v.forms {
		if bytes.Contains(b, []byte(form[:min(len(form), minTail)])) {
			return true
		}
	}
	return false
}

// valueForms returns the forms a text may show secrets in (as given,
// query- or path-escaped, escaped as %q writes them, or with each '/'
// escaped as "\/", as PHP's json_encode writes it unless told
// JSON_UNESCAPED_SLASHES: php.net/manual/en/json.constants.php), the
// longest first. An opaque base64 token holds a '/' one time in two.
func valueForms(secrets []string) []string {
	forms := make([]string, 0, 5*len(secrets))
	for _, s := range secrets {
		quoted := QuotedForm(s)
		slashed := ""
		if strings.Contains(quoted, "/") {
			slashed = strings.ReplaceAll(quoted, "/", `\/`)
		}
		for _, form := range [...]string{url.QueryEscape(s), url.PathEscape(s), quoted, slashed, s} {
			if form != "" && !slices.Contains(forms, form) {
				forms = append(forms, form)
			}
		}
	}
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

// redacted replaces a secret's text.
const redacted = "REDACTED"

// blankForm replaces form in text: everywhere when it is minAnywhere
// bytes or more, else where it stands as a word.
func blankForm(text, form string) string {
	if len(form) >= minAnywhere {
		return strings.ReplaceAll(text, form, redacted)
	}
	var b strings.Builder
	done := 0 // text[:done] is in b
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], form)
		if j < 0 {
			break
		}
		start, end := i+j, i+j+len(form)
		if !standsAlone(text, form, start, end) {
			i = start + 1
			continue
		}
		b.WriteString(text[done:start])
		b.WriteString(redacted)
		done, i = end, end
	}
	if b.Len() == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

// blankTail replaces the start of form that ends text, if minTail bytes
// or more and not form whole (blankForm's). Not a start that ends before
// a space of form (' ', or escaped as '+' or %20): that is a header
// value's scheme ("Bearer", which a refusal's "must start with Bearer"
// ends with), and the credential after it is a form of its own.
func blankTail(text, form string) string {
	for n := min(len(form)-1, len(text)); n >= minTail; n-- {
		space := form[n] == ' ' || form[n] == '+' || strings.HasPrefix(form[n:], "%20")
		if !space && strings.HasSuffix(text, form[:n]) {
			start := len(text) - n
			if len(form) < minAnywhere && !standsAlone(text, form, start, len(text)) {
				return text
			}
			return text[:start] + redacted
		}
	}
	return text
}

// standsAlone reports whether form, found at text[start:end], stands as
// a word: no word byte of text joins a word byte at either of its ends,
// unless an escape sequence (%XX, \n, \xXX, \uXXXX) ends just before it.
func standsAlone(text, form string, start, end int) bool {
	if start > 0 && wordByte(form[0]) && wordByte(text[start-1]) && !escapeBefore(text[:start]) {
		return false
	}
	return end == len(text) || !wordByte(form[len(form)-1]) || !wordByte(text[end])
}

// wordByte reports whether b is part of a word as keys and names are
// written: a letter, a digit, '_' or '-'.
func wordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// escapeBefore reports whether s ends with an escape sequence: a URL's
// %XX, or a quoted string's \n, \xXX or \uXXXX.
func escapeBefore(s string) bool {
	hexTail := func(n int) bool {
		if len(s) < n {
			return false
		}
		for i := len(s) - n; i < len(s); i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return true
	}
	n := len(s)
	return n >= 3 && s[n-3] == '%' && hexTail(2) ||
		n >= 2 && s[n-2] == '\\' ||
		n >= 4 && s[n-4] == '\\' && s[n-3] == 'x' && hexTail(2) ||
		n >= 6 && s[n-6] == '\\' && s[n-5] == 'u' && hexTail(4)
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
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
