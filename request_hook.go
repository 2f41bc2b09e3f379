package idem

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/idemkit/idem/journal"
)

// beforeHook is what of a request the journal promised, as it stood
// before the request hook ran: the hook is there to add credentials,
// and an attempt it changed otherwise is not the journaled operation.
type beforeHook struct {
	method, path string
	body         io.ReadCloser
	getBody      func() (io.ReadCloser, error)
	length       int64
}

func hookBefore(req *http.Request) beforeHook {
	return beforeHook{method: req.Method, path: req.URL.Path, body: req.Body, getBody: req.GetBody, length: req.ContentLength}
}

// hookChangeErr checks req after the request hook ran against b and the
// journaled rec; a non-nil error says what the hook changed, and the
// attempt is not sent. Every attempt must carry the journaled key and
// bytes: middleware written for plain clients sets a fresh
// Idempotency-Key per request, re-encodes the body with a nonce, or
// puts the current ETag over the journaled If-Match, and the resend
// after a lost answer is then another request (at Stripe a second
// charge, its idempotency layer keyed by the header). What a hook
// legitimately does stays: headers of its own, Basic auth, query
// parameters, segments before the path (Telegram's /bot<token>), the
// key set to the value it holds, the body read and put back byte for
// byte (a signer's), a precondition the journal does not hold.
//
// Conditional headers (If-*) under a name net/http does not spell so
// ("if-match") are moved to the canonical one first: net/http sends
// both fields, a server reads them as one, and idem judges the 412 by
// the canonical name (conditionalUpdate). The key under another
// spelling alone is moved back too. The body the hook left equal to
// the journaled one is idem's again, and so is GetBody always: net/http
// rewinds through it to resend.
func (c *Client) hookChangeErr(rec *journal.Record, query bool, req *http.Request, b beforeHook) error {
	if req.Method != b.method {
		return hookChanged("changed the method from %s to %s", b.method, req.Method)
	}
	if req.URL == nil {
		return hookChanged("removed the URL")
	}
	// The sent path is not quoted: the segments the hook added may be a
	// token.
	if p := req.URL.Path; p != b.path && (!strings.HasSuffix(p, b.path) || b.path != "" && b.path[0] != '/') {
		return hookChanged("changed the URL's path %q (it may add segments before it only, as a token's /bot<token>)", b.path)
	}
	// Before the query's return: a result query carries the account
	// too, and under another it reads that account's result for the key.
	for _, name := range accountHeaders {
		if want, ok := rec.Header[name]; ok {
			if err := accountKept(req.Header, name, want); err != nil {
				return err
			}
		} else if _, spellings, _ := fieldOf(req.Header, name); spellings > 0 {
			// Not journaled, it is what the hook found at send time:
			// the caller's context on a Submit, nothing on Resume's
			// resend, which then goes to the platform's own account
			// under the same key.
			return hookChanged("added the %s header, which the journal does not hold: the account the key is scoped to goes in Request.Header, journaled, so that every attempt and Resume's send it too", name)
		}
	}
	if query {
		return nil
	}
	canonicalConditionals(req.Header)
	if name := c.cfg.keyHeader; name != "" {
		if err := keyHeaderKept(req.Header, name, c.keyValue(rec.Key)); err != nil {
			return err
		}
	}
	for name, vals := range rec.Header {
		// Journaled names are canonical (newRecord).
		if strings.HasPrefix(name, "If-") && !slices.Equal(req.Header[name], vals) {
			return hookChanged("changed the journaled %s header (a precondition fetched per attempt? a resend must carry the version the first copy was built on)", name)
		}
	}
	req.GetBody = b.getBody
	if req.Body == b.body && req.ContentLength == b.length {
		return nil
	}
	if err := sameBody(req.Body, rec.Body); err != nil {
		return err
	}
	body, err := b.getBody()
	if err != nil {
		return fmt.Errorf("idem: journaled body: %w", err)
	}
	req.Body, req.ContentLength = body, b.length
	return nil
}

// hookChangeError is the error of an attempt the request hook changed,
// never sent.
type hookChangeError struct{ msg string }

func (e *hookChangeError) Error() string { return e.msg }

// hookChanged is a hookChangeError saying what the hook changed.
func hookChanged(format string, args ...any) error {
	return &hookChangeError{fmt.Sprintf("idem: request hook "+format+"; nothing was sent: set credentials only in the hook, the key, body, method, path and journaled preconditions go out as journaled on every attempt", args...)}
}

// canonicalConditionals moves the values of conditional header fields
// under a non-canonical name to the canonical one, each value once.
func canonicalConditionals(h http.Header) {
	for name, vals := range h {
		if len(name) < 3 || !strings.EqualFold(name[:3], "if-") {
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if canon == name {
			continue
		}
		delete(h, name)
		for _, v := range vals {
			if !slices.Contains(h[canon], v) {
				h[canon] = append(h[canon], v)
			}
		}
	}
}

// keyHeaderKept reports, as an error, a key header (name, canonical)
// that does not carry the journaled key (want) once, under whatever
// spellings of its name: a server reads a second value as part of the
// key, or as another one. A key under another spelling alone is moved
// back to name.
func keyHeaderKept(h http.Header, name, want string) error {
	vals, _, other := fieldOf(h, name)
	switch {
	case len(vals) == 0:
		return hookChanged("removed the %s header, which carries the journaled key", name)
	case len(vals) > 1:
		return hookChanged("gave the %s header %d values (an Add, or another spelling of its name) where it carries the journaled key once", name, len(vals))
	case vals[0] != want:
		return hookChanged("set the %s header to another value than the journaled key (a request id made per request?)", name)
	}
	if other != "" {
		delete(h, other)
		h[name] = []string{want}
	}
	return nil
}

// accountHeaders name the account a request acts as, under which the
// provider scopes its keys: Stripe Connect's Stripe-Account
// (docs.stripe.com/connect/authentication), Razorpay's partner
// X-Razorpay-Account (razorpay.com/docs/partners/aggregators/partner-auth).
// Journaled, the hook may not change them: the resend of a charge whose
// answer was lost would go to another account under the same key, a
// second charge there, and its answer be taken as ours.
var accountHeaders = [...]string{"Stripe-Account", "X-Razorpay-Account"}

// accountKept reports, as an error, a journaled account header (name,
// canonical) that does not carry the journaled values (want) under one
// spelling of its name; under another spelling alone they are moved
// back to name.
func accountKept(h http.Header, name string, want []string) error {
	vals, spellings, other := fieldOf(h, name)
	if spellings > 1 || !slices.Equal(vals, want) {
		return hookChanged("changed the journaled %s header, the account the key is scoped to (an account taken from the caller's context, which Resume and Run do not have?)", name)
	}
	if other != "" {
		delete(h, other)
		h[name] = vals
	}
	return nil
}

// fieldOf returns the values of the header field name (canonical) under
// every spelling of its name in h, how many spellings hold it, and one
// that is not name.
func fieldOf(h http.Header, name string) (vals []string, spellings int, other string) {
	for k, vs := range h {
		if k != name && !strings.EqualFold(k, name) {
			continue
		}
		spellings++
		if k != name {
			other = k
		}
		if vals == nil {
			vals = vs // no copy for the one spelling of every attempt
		} else {
			// Capped: an append must not write into the hook's array.
			vals = append(vals[:len(vals):len(vals)], vs...)
		}
	}
	return vals, spellings, other
}

// sameBody reports, as an error, a body the request hook put on (r) that
// is not the journaled one (want). r is read whole, as net/http would
// have, up to a byte past want, and closed.
func sameBody(r io.ReadCloser, want []byte) error {
	var got []byte
	if r != nil && r != http.NoBody {
		var err error
		got, err = io.ReadAll(io.LimitReader(r, int64(len(want))+1))
		_ = r.Close()
		if err != nil {
			return hookChanged("replaced the body with one that could not be read (%v)", err)
		}
	}
	if !bytes.Equal(got, want) {
		return hookChanged("replaced the body with other bytes (a re-encoding, a nonce or a timestamp added?)")
	}
	return nil
}
