package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

// Request describes one business intent to journal with Prepare or Submit.
// Its Body and Header are sent byte-for-byte on every attempt, forever.
type Request struct {
	// Scope is the caller identity or account the key belongs to (keys are
	// unique per scope). Empty means the client's WithScope default.
	Scope string
	// Key is the idempotency key. Empty means a fresh random UUID on every
	// call, so a call made again (a handler retried, a message
	// redelivered) is a new operation and a second order: supply your own
	// (an order-draft id, say) to tie the key to the business intent, and
	// when the key travels in the body (WithKeyInBody).
	Key string
	// Ref is your own reference for logs and the operator tool; optional.
	Ref string
	// Method defaults to POST.
	Method string
	// URL is the absolute http or https URL the operation is sent to.
	URL string
	// ResultURL is the endpoint that reports this operation's result by
	// key. Empty means the client's WithResultEndpoint template, if any;
	// without one, ambiguous outcomes are settled by resending with the same
	// key (servers that replay their stored response, like Stripe).
	ResultURL string
	// Header holds non-secret headers sent on every attempt, result
	// queries included (but for those about the body or conditional on
	// the target: Content-*, If-*, Range, Expect, Digest, Repr-Digest and
	// method overrides); they are journaled. Headers net/http sets itself
	// or would not send as journaled (Host, Content-Length,
	// Transfer-Encoding, Trailer, and the hop-by-hop Connection,
	// Keep-Alive, Proxy-Connection, TE and Upgrade) are refused with
	// ErrInvalidRequest. An Accept-Encoding that
	// offers a coding idem cannot decode (br, zstd, deflate) is left off
	// the wire, and net/http asks for gzip itself. Credentials go in
	// WithRequestHook instead.
	Header http.Header
	// Body is sent as is. Content-Type defaults to application/json. It
	// must not change while Prepare or Submit reads it; the journal keeps
	// a copy, and the call keeps none once it returns.
	Body []byte
}

// connectionHeader says why a header (canonical name) cannot be
// journaled, or "" if it can. Each is about one connection or one
// message's framing, not the operation: net/http sends the URL's host and
// frames the body itself, dropping these over HTTP/1.1 (the server would
// not get what the journal says it got), and its HTTP/2 transport refuses
// a request with some of them (Transfer-Encoding other than chunked,
// Connection other than close or keep-alive, Upgrade) before sending it,
// on every attempt, for ever.
func connectionHeader(canon string) string {
	switch canon {
	case "Host":
		return "net/http sends the URL's host, never this header; put the host in URL"
	case "Content-Length", "Transfer-Encoding", "Trailer":
		return "net/http frames the body itself, from Body; remove it"
	case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Upgrade":
		return "a hop-by-hop header, about one connection, not the operation (HTTP/2 refuses some outright); remove it, and configure connections on your http.Client's Transport"
	}
	return ""
}

// validHeaderValue refuses control characters (CR and LF above all): a
// journaled value net/http would refuse could never be sent.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// hookHeaderErr checks the headers after the request hook ran: net/http
// refuses an invalid one before sending and before any trace event, which
// reads as "maybe sent", so the operation would be judged maybe executed
// though never sent. The error names the header, never its value (a
// credential, most likely).
func hookHeaderErr(h http.Header) error {
	for name, vals := range h {
		if !httpsyntax.ValidHeaderName(name) {
			return fmt.Errorf("idem: request hook: header name %q is not a valid HTTP token; net/http refuses it, so nothing was sent", name)
		}
		for _, v := range vals {
			if !validHeaderValue(v) {
				return fmt.Errorf("idem: request hook: header %s has a control character (a token read with its trailing newline?); net/http refuses it, so nothing was sent", name)
			}
		}
	}
	return nil
}

const maxNameLen = 255

// checkName validates a key or scope: it travels in a header and keys a
// journal record, so visible ASCII only.
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidRequest, what)
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("%w: %s is %d bytes; at most %d", ErrInvalidRequest, what, len(s), maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return fmt.Errorf("%w: %s %q has byte %#x at %d; use visible ASCII (a UUID is fine)", ErrInvalidRequest, what, s, s[i], i)
		}
	}
	return nil
}

// newRecord validates req and turns it into a pending journal record. The
// array it also returns, made with the record, is room for a Submit's
// first attempt. journaled: the journal already holds req's operation
// (journaledBefore), so a credential in its URL or headers is let
// through: journaledBefore takes it out of the record.
func (c *Client) newRecord(req Request, journaled bool) (*journal.Record, *[1]journal.Attempt, error) {
	// Checked byte by byte only when the caller gave them: the Client's
	// scope was checked when it was made (WithScope; DefaultScope), and
	// a key newKey made is a UUID (TestOwnNamesPassCheckName).
	scope := req.Scope
	if scope == "" {
		scope = c.cfg.scope
	} else if err := checkName("scope", scope); err != nil {
		return nil, nil, err
	}
	key := req.Key
	if key == "" {
		if c.cfg.keyHeader == "" {
			return nil, nil, fmt.Errorf("%w: with WithKeyInBody, set Request.Key (idem.NewKey()) and put it in the body", ErrInvalidRequest)
		}
		var err error
		if key, err = newKey(); err != nil {
			return nil, nil, err
		}
	} else if err := checkName("key", key); err != nil {
		return nil, nil, err
	}
	if key == "." || key == ".." {
		// URL resolution would turn its result endpoint into another
		// resource's.
		return nil, nil, fmt.Errorf("%w: key %q is a URL path segment of its own; use another key", ErrInvalidRequest, key)
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	// A method is a token, as a header name is: net/http refuses any
	// other before sending, on every attempt.
	if !httpsyntax.ValidHeaderName(method) || strings.ToUpper(method) != method {
		return nil, nil, fmt.Errorf("%w: method %q; use an upper-case HTTP method such as POST", ErrInvalidRequest, method)
	}
	var target *parsedURL
	if journaled {
		// Not cached: the cache holds only URLs Prepare accepts.
		u, err := checkedURL("URL", req.URL, false)
		if err != nil {
			return nil, nil, err
		}
		target = &parsedURL{raw: req.URL, journaled: u.String(), u: *u}
	} else {
		var err error
		if target, err = c.urls.parse(req.URL); err != nil {
			return nil, nil, err
		}
	}
	u := &target.u // read only: the cache's
	resultURL := req.ResultURL
	if resultURL == "" && c.cfg.resultTemplate != "" {
		// In a query string '+', '&' and '=' mean something, and
		// PathEscape keeps them: the server would read another key. Each
		// {key} is escaped for the part it is in (a template may have one
		// in the path and another in the query string).
		tmpl, query := c.cfg.resultTemplate, ""
		if q := strings.IndexByte(tmpl, '?'); q >= 0 {
			tmpl, query = tmpl[:q], tmpl[q:]
		}
		filled := strings.ReplaceAll(tmpl, "{key}", url.PathEscape(key)) +
			strings.ReplaceAll(query, "{key}", url.QueryEscape(key))
		ref, err := url.Parse(filled)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: result endpoint for key %q: %v", ErrInvalidRequest, key, err)
		}
		resultURL = u.ResolveReference(ref).String()
	}
	if resultURL != "" {
		if _, err := checkedURL("ResultURL", resultURL, !journaled); err != nil {
			return nil, nil, err
		}
	}
	if c.cfg.keyHeader == "" && !keyInBody(key, req.Body) {
		// Nothing journaled for this call; but an operation an earlier
		// release journaled under the key, with the key in a header,
		// stands (ReviewKeyNotCarried once driven), and a caller told
		// only "invalid" might order again under a new key.
		return nil, nil, fmt.Errorf("%w: with WithKeyInBody, the body must carry Request.Key %q: without it the server gets no key and may execute every retry "+
			"(an operation journaled under this key by a Client that sent it in a header stands, and is not sent under these settings: Lookup it)", ErrInvalidRequest, key)
	}
	if len(req.Body) > MaxBodyBytes {
		return nil, nil, fmt.Errorf("%w: body is %d bytes; at most %d can be journaled", ErrInvalidRequest, len(req.Body), MaxBodyBytes)
	}
	if len(req.Ref) > maxNameLen {
		return nil, nil, fmt.Errorf("%w: Ref is %d bytes; at most %d", ErrInvalidRequest, len(req.Ref), maxNameLen)
	}
	// Canonical names, so that a resubmission compares equal however the
	// caller spelled them.
	header := make(http.Header, len(req.Header)+1)
	for name, vals := range req.Header {
		if !httpsyntax.ValidHeaderName(name) {
			return nil, nil, fmt.Errorf("%w: header name %q is not a valid HTTP token", ErrInvalidRequest, name)
		}
		canon := http.CanonicalHeaderKey(name)
		// Before the credential check: the key's header may be named as
		// a credential's (X-Amzn-Client-Token), and the advice to add it
		// in a hook would have the key made afresh on every resend.
		if c.cfg.keyHeader != "" && canon == c.cfg.keyHeader {
			return nil, nil, fmt.Errorf("%w: Header sets %s, which idem sets from Request.Key; remove it from Header", ErrInvalidRequest, canon)
		}
		// Never journaled: they would outlive their credentials on disk.
		if !journaled && httpsyntax.CredentialHeader(canon) {
			return nil, nil, fmt.Errorf("%w: %s would be written to disk; add credentials at send time with idem.WithRequestHook or your http.Client's Transport", ErrSecretHeader, canon)
		}
		if why := connectionHeader(canon); why != "" {
			return nil, nil, fmt.Errorf("%w: header %s: %s", ErrInvalidRequest, canon, why)
		}
		for _, v := range vals {
			if !validHeaderValue(v) {
				return nil, nil, fmt.Errorf("%w: header %s has a control character in %q; it could never be sent", ErrInvalidRequest, canon, v)
			}
		}
		if _, twice := header[canon]; twice {
			// Merged in map order, which varies: the same Request would
			// journal differently, and a resubmission would read as the
			// key reused for another request.
			return nil, nil, fmt.Errorf("%w: header %s is given under two spellings of its name; give its values once, in the order to send them", ErrInvalidRequest, canon)
		}
		header[canon] = append(header[canon], vals...)
	}
	// The record and the default Content-Type's value list in one
	// allocation: newRecord runs on every Submit.
	made := &struct {
		rec   journal.Record
		ct    [1]string
		first [1]journal.Attempt
	}{}
	if headerValue(header, "Content-Type") == "" && len(req.Body) > 0 {
		made.ct[0] = "application/json"
		header["Content-Type"] = made.ct[:1:1]
	}
	now := c.cfg.clock.Now()
	// Copied once, here, and hashed once: the record is the client's own,
	// so the bbolt Store, told so (internal/owned), neither copies nor
	// hashes it again; and a caller that changes its buffer while the
	// call runs cannot change what is sent.
	body := bytes.Clone(req.Body)
	if len(body) == 0 {
		body = nil
	}
	made.rec = journal.Record{
		Scope:    scope,
		Key:      key,
		Ref:      req.Ref,
		Method:   method,
		URL:      target.journaled,
		QueryURL: resultURL,
		Header:   header,
		Body:     body,
		BodySHA:  sha256.Sum256(body),
		State:    StatePending,
		Created:  now,
		Updated:  now,
		// Due only if the caller abandons it: Do normally settles it first.
		NextDue:      now.Add(c.cfg.reconcileInterval),
		KeyPlacement: c.cfg.keyPlacement,
	}
	return &made.rec, &made.first, nil
}

// keyInBody reports whether body holds key as written, as JSON writes it
// (with or without HTML escaping) or as form encoding writes it.
func keyInBody(key string, body []byte) bool {
	if bytes.Contains(body, []byte(key)) || bytes.Contains(body, []byte(url.QueryEscape(key))) {
		return true
	}
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(key) == nil && bytes.Contains(body, bytes.TrimSuffix(b.Bytes(), []byte("\n"))) {
			return true
		}
	}
	return false
}

// keyField is the name of the body's member that holds key, the first in
// a JSON document's order ("request_id": key, at any depth) or, in a form,
// the first by name (request_id=key; of a nested one, the innermost:
// order[external_id]=key is external_id), or "" when none does: the name
// by which a server whose key goes in the body speaks of it in its errors
// (Airwallex's "The same request ID has already been used", Rails'
// {"external_id":["has already been taken"]}).
func keyField(key string, body []byte) string {
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return ""
		}
		for _, name := range slices.Sorted(maps.Keys(form)) {
			if slices.Contains(form[name], key) {
				// Rails' and PHP's nested params: order[external_id],
				// items[][ref].
				name = strings.TrimRight(name, "[]")
				return name[strings.LastIndexByte(name, '[')+1:]
			}
		}
		return ""
	}
	return jsonKeyMember(key, body)
}

// jsonKeyMember is the name of the first member of JSON body, in
// document order and at any depth, whose value is key, or "" when none
// is (or the body is not JSON).
func jsonKeyMember(key string, body []byte) string {
	// A frame per open object or array: whether it is an object, and
	// whether its next string is a member's name.
	type frame struct{ object, name bool }
	var open []frame
	var member string
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		top := len(open) - 1
		inObject := top >= 0 && open[top].object
		switch t := tok.(type) {
		case json.Delim:
			if t == '}' || t == ']' {
				open = open[:top]
				continue
			}
			if inObject {
				open[top].name = true
			}
			open = append(open, frame{object: t == '{', name: t == '{'})
			continue
		case string:
			if inObject && open[top].name {
				member, open[top].name = t, false
				continue
			}
			if inObject && t == key {
				return member
			}
		}
		if inObject {
			open[top].name = true
		}
	}
}

func absoluteURL(field, raw string) (*url.URL, error) { return checkedURL(field, raw, true) }

// checkedURL is absoluteURL, which refuses credentials in the URL only
// when secrets is set.
func checkedURL(field, raw string, secrets bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the whole URL, a password in it
		// included: name the field and the reason only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %s is not a valid URL: %v", ErrInvalidRequest, field, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %s %q must be an absolute http or https URL", ErrInvalidRequest, field, u.Redacted())
	}
	if secrets && u.User != nil {
		return nil, fmt.Errorf("%w: %s carries credentials (user:password@); they would be journaled: use WithRequestHook", ErrSecretHeader, field)
	}
	if secrets {
		if name := httpsyntax.SecretParamIn(u.RawQuery); name != "" {
			return nil, fmt.Errorf("%w: %s has a %s query parameter; it would be journaled: add it at send time with WithRequestHook (r.URL.RawQuery)", ErrSecretHeader, field, name)
		}
	}
	// Dialing fails on every attempt without a host name ("http://:8080/"
	// dials this machine, not the API) or with a port no socket has.
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %s %q has no host name; name the API's host", ErrInvalidRequest, field, u.String())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: %s %q: port %s is out of range; use 1 to 65535, or none for the scheme's default", ErrInvalidRequest, field, u.String(), p)
		}
	}
	return u, nil
}

// sameRequest reports whether a resubmitted request matches the journaled
// one: the server's own idempotency check compares the same things. A
// journaled request that carries a credential this release refuses (an
// earlier release journaled it) matches the request without it, or with
// another value of it (a key rotated since), too: the caller who followed
// ErrSecretHeader's advice now adds it at send time, and the server sees
// the same request. "Another request" would be false, and invite the
// order again under a new key while Run sends the first.
func sameRequest(stored, rec *journal.Record) bool {
	if stored.Method != rec.Method || stored.BodySHA != rec.BodySHA {
		return false
	}
	if stored.URL == rec.URL && maps.EqualFunc(stored.Header, rec.Header, slices.Equal[[]string]) {
		return true
	}
	su, ok := withoutCredentials(stored.URL)
	ru, rok := withoutCredentials(rec.URL)
	return ok && rok && su == ru && sameBesidesCredentials(stored.Header, rec.Header) && sameBesidesCredentials(rec.Header, stored.Header)
}

// sameBesidesCredentials reports whether every header of a but those
// carrying a credential (CredentialHeader) is in b with the same values.
func sameBesidesCredentials(a, b map[string][]string) bool {
	for name, v := range a {
		if w, ok := b[name]; !httpsyntax.CredentialHeader(name) && (!ok || !slices.Equal(v, w)) {
			return false
		}
	}
	return true
}

// credentialsOut is raw without its credentials (withoutCredentials), or
// raw as it is when it carries none (or is empty); ok is false when it
// does not parse.
func credentialsOut(raw string) (string, bool) {
	if raw == "" {
		return raw, true
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	if u.User == nil && httpsyntax.SecretParamIn(u.RawQuery) == "" {
		return raw, true
	}
	return withoutCredentials(raw)
}

// withoutCredentials is a journaled URL as this release would journal it
// with its credentials (user information, SecretParam's query
// parameters) left to the request hook; ok is false when it does not
// parse.
func withoutCredentials(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	u.User = nil
	u.RawQuery = httpsyntax.WithoutSecretParams(u.RawQuery)
	return u.String(), true
}
