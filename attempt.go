package idem

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/internal/recordable"
	"github.com/idemkit/idem/journal"
)

// exchange is what one HTTP request/response taught us.
type exchange struct {
	status   int
	header   http.Header
	body     []byte
	tooLarge bool  // the body passed the cap: only its start kept
	err      error // transport error, or an error reading the body
	wrote    bool  // the request was fully written: the server may act on it
	// unsent: surely never sent. Only when net/http's trace shows it took
	// the request (GetConn) and never wrote it, or idem failed before
	// sending; a transport that reports no trace events gets no benefit of
	// the doubt.
	unsent bool
	// resent: net/http sent the request again on a fresh connection, on
	// its own, after the first died with no answer (it does so for a
	// request with an Idempotency-Key header): that first copy may have
	// executed, so this attempt's replayed answer may be its own. Not
	// net/http's resends of HTTP/2 copies (see attemptTrace.resent).
	resent     bool
	retryAfter time.Duration // capped by WithRetryAfterCap: what a caller waits
	// serverUntil is when the server's Retry-After ends, bounded only
	// by the reconciler's longest interval: until when a handed-off
	// operation, and Run's visits to the host, are left alone. A time,
	// not a duration: a call may sleep before it hands off, and the
	// server's wait runs meanwhile. Zero: no wait asked.
	serverUntil time.Time
	dur         time.Duration
	// sentQuery is the URL's query string as sent: the request hook may
	// have added to the journaled one (an API key).
	sentQuery string
	// sent are the credentials the request carried (sentSecrets), added
	// by the request hook: a server may quote them in its answer, and
	// they are blanked in all that is recorded of it (blankSent).
	sent []string
	// ifVersion and ifAbsent: the submit as sent, after the request
	// hook, was conditional on its target's version (conditionalUpdate)
	// or create-only (conditionalCreate). A hook may put on an If-Match
	// it fetches per attempt, or a signer the conditional headers it
	// signs, which the journal does not hold: their 412 is read by what
	// the server was sent.
	ifVersion, ifAbsent bool
}

// drainLimit is how much of an over-long body is read away so the
// connection can be reused; past it the connection is dropped instead.
const drainLimit = 64 << 10

// onceRule is how far a send lets net/http send its request again on its
// own.
type onceRule uint8

const (
	// resendFree: the endpoint de-duplicates by the key (an answer of
	// it not saying otherwise has come: heardEndpoints); net/http's
	// resends are let be.
	resendFree onceRule = iota
	// sendOnce: the endpoint ignores the key, or nothing has said yet
	// whether it reads it, or the endpoints known to ignore it are not
	// read yet; no copy after one written whole, over either protocol
	// (attemptTrace.sentOnce; of an empty body, hideReplayKey and
	// attemptTrace.stop).
	sendOnce
)

// send performs one HTTP exchange for rec with its own timeout. once: how
// far the request may go on the wire again without idem (onceRule).
func (c *Client) send(ctx context.Context, rec *journal.Record, query bool, once onceRule) exchange {
	start := c.cfg.clock.Now()
	actx, cancel := context.WithTimeout(ctx, c.cfg.attemptTimeout)
	defer cancel()
	tr := newAttemptTrace()
	if once != resendFree {
		// Before WithClientTrace, which composes a caller's own hooks
		// into these.
		tr.hooks.Got1xxResponse = tr.interimResponse
		if len(rec.Body) == 0 {
			// net/http resends an empty body (NoBody) over HTTP/2
			// without asking GetBody (attemptTrace.stop).
			actx, tr.stop = context.WithCancelCause(actx)
			defer tr.stop(nil)
		}
	}
	actx = httptrace.WithClientTrace(actx, &tr.hooks)

	var req *http.Request
	var err error
	if query {
		req, err = http.NewRequestWithContext(actx, http.MethodGet, rec.QueryURL, nil)
	} else if p := c.urls.lookup(rec.URL); p != nil {
		// Parsed already: NewRequest's own parse of rec.URL would give the
		// same, and the URL and Host are all it sets from it
		// (TestRequestFromCachedURL). The URL and the body's reader are
		// the trace's room for them (parsedURL.newRequest).
		var ok bool
		if req, ok = p.newRequest(actx, rec.Method, rec.Body, &tr.room); !ok {
			if req, err = http.NewRequestWithContext(actx, rec.Method, "", bytes.NewReader(rec.Body)); err == nil {
				p.setRequestURL(req)
			}
		}
	} else {
		req, err = http.NewRequestWithContext(actx, rec.Method, rec.URL, bytes.NewReader(rec.Body))
	}
	if err != nil {
		return exchange{err: fmt.Errorf("idem: build request: %w", err), unsent: true}
	}
	spare := 0
	if !query && c.cfg.keyHeader != "" {
		spare = 1 // the key's value shares the copy's backing array
	}
	room := copyHeader(req.Header, rec.Header, spare, tr.values[:])
	if v, ok := req.Header["Accept-Encoding"]; ok && !readableCodings(v) {
		// A journaled Accept-Encoding (copied from a browser's request,
		// say) that offers Brotli, zstd or deflate gets answers in it from
		// a CDN that picks the best coding offered: bodies idem cannot
		// read, so no answer would ever settle the operation. Without the
		// header net/http asks for gzip itself, and decodes it.
		delete(req.Header, "Accept-Encoding")
	}
	if query {
		// A result query carries the journaled headers too: one may scope
		// the key (an account header such as Stripe-Account), and without
		// it the server reads the result another account holds for the
		// same key. Those about the submit's body or its target (a
		// conditional If-None-Match: * would get a 304) stay off the GET.
		for name := range req.Header {
			if submitOnlyHeader(name) {
				delete(req.Header, name)
			}
		}
		// A shared cache in between (a corporate proxy, Squid) may hold
		// an earlier "processing" or "not found" for this URL as long as
		// the origin's max-age lets it: no-cache (RFC 9111 5.2.1.4) makes
		// it ask the origin. A journaled Cache-Control is the caller's.
		if _, ok := req.Header["Cache-Control"]; !ok {
			req.Header["Cache-Control"] = []string{"no-cache"} // the hook may change it
		}
	} else if c.cfg.keyHeader != "" {
		// keyHeader is canonical (WithKeyHeader): Set's work is done.
		req.Header[c.cfg.keyHeader] = append(room, c.keyValue(rec.Key))
	}
	path, rawQuery := req.URL.Path, req.URL.RawQuery
	if c.cfg.hook != nil {
		before := hookBefore(req)
		if err := c.cfg.hook(req); err != nil {
			// The hook may quote what it just added (a signer's "signing
			// <URL>", a token refresh's header): its error is journaled
			// and logged as the attempt's.
			err = sentURLOut(fmt.Errorf("idem: request hook: %w", err), journaledURL(rec, query), "", req.URL, sentSecrets(path, rawQuery, c.cfg.keyHeader, req)...)
			return exchange{err: err, unsent: true}
		}
		if err := hookHeaderErr(req.Header); err != nil {
			return exchange{err: err, unsent: true}
		}
		if err := c.hookChangeErr(rec, query, req, before); err != nil {
			return exchange{err: err, unsent: true}
		}
	}
	sent := sentSecrets(path, rawQuery, c.cfg.keyHeader, req)
	var ifVersion, ifAbsent bool
	if !query {
		ifVersion, ifAbsent = conditionalUpdate(req.Method, req.Header), conditionalCreate(req.Header)
	}
	if once != resendFree {
		// net/http sends a request with an Idempotency-Key header again,
		// on a fresh connection, when a reused one dies after it was
		// written (isReplayable), and over HTTP/2 after a stream's reset
		// (a PROTOCOL_ERROR one too): to a server that ignores the key, a
		// second charge. A body it cannot rewind then stops it; idem
		// judges the lost answer itself. An empty body is NoBody, which
		// net/http resends without rewinding: over HTTP/1 it is not
		// replayable with the key under another spelling
		// (hideReplayKey), over HTTP/2 the copy is stopped before it is
		// written (attemptTrace.stop). A body that is not NoBody would
		// do for both, but net/http frames an empty one of unknown length
		// as chunked over HTTP/1, with no Content-Length: a POST some
		// servers refuse (411).
		req.GetBody = tr.sentOnce(req.GetBody)
		if req.Body == nil || req.Body == http.NoBody {
			hideReplayKey(req.Header)
		}
	}
	if err := context.Cause(actx); err != nil {
		// Surely unsent (Close while the attempt was being journaled, say):
		// net/http would fail it before any trace event, which reads as
		// "maybe sent".
		return exchange{err: err, unsent: true}
	}
	c.clocks.sending(req.URL.Host, start)
	resp, err := c.hc.Do(req)
	// Only a first copy that was written whole may have executed: net/http
	// also retries a request it never wrote (a dead idle connection).
	ex := exchange{wrote: tr.wrote.Load(), resent: tr.resent.Load(), sentQuery: req.URL.RawQuery, sent: sent, ifVersion: ifVersion, ifAbsent: ifAbsent}
	if err != nil {
		// net/http's *url.Error quotes the URL as sent, with whatever the
		// request hook added (an API key in the query string): that text
		// is journaled and logged. Name the journaled URL instead.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			// Redacted: a record journaled by a release that still
			// accepted a credential in its URL holds it (RedactURL leaves
			// any other URL as it is).
			journaled := httpsyntax.RedactURL(journaledURL(rec, query))
			cause := ue.Err
			if tr.stop != nil && context.Cause(actx) == errSentOnce {
				// A copy stopped ends as "context canceled", which
				// reads as the caller's doing.
				cause = errSentOnce
			}
			err = &url.Error{Op: ue.Op, URL: journaled, Err: sentURLOut(cause, journaled, ue.URL, req.URL, sent...)}
		}
		ex.err = err
		ex.unsent = !ex.wrote && tr.traced.Load() && tr.conns.Load() == 0
		ex.dur = c.cfg.clock.Now().Sub(start)
		return ex
	}
	defer resp.Body.Close()
	ex.wrote = true
	ex.status = resp.StatusCode
	ex.header = resp.Header
	body, size := io.Reader(resp.Body), resp.ContentLength
	if ce := strings.TrimSpace(headerValue(resp.Header, "Content-Encoding")); !resp.Uncompressed &&
		(strings.EqualFold(ce, "gzip") || strings.EqualFold(ce, "x-gzip")) { // x-gzip is gzip (RFC 9110), and readableCodings keeps it
		// net/http decompresses only what it asked for: a journaled
		// Accept-Encoding turns that off, and gzip bytes decode to
		// nothing, so the answer could never settle the operation. The
		// cap below bounds the decompressed size.
		zr, err := gzip.NewReader(resp.Body)
		switch {
		case err == nil:
			body, size = zr, -1
		case err == io.EOF:
			body, size = http.NoBody, 0 // an empty body, as a 204's
		default:
			// Not read whole: judged as a body cut in transit.
			body, ex.err = http.NoBody, fmt.Errorf("idem: gzip body: %w", err)
		}
	}
	// One byte past the cap tells "over the cap" from "at it"; a cap of
	// math.MaxInt64 ("no limit") must not overflow to a negative limit,
	// which reads nothing and leaves every answer undecodable.
	if ex.err == nil {
		ex.body, ex.err = readAtMost(body, min(c.cfg.maxResponse, math.MaxInt64-1)+1, size)
	}
	if int64(len(ex.body)) > c.cfg.maxResponse {
		ex.body, ex.tooLarge = ex.body[:c.cfg.maxResponse], true
		_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	}
	// One reading of the server's wait for both uses: a call's wait and,
	// through serverUntil, a hand-off's due time and Run's rest for the
	// host (hostNews), so the two never disagree.
	end := c.cfg.clock.Now()
	// A copy a cache served (a CDN may ignore the query's no-cache) keeps
	// the origin's Date of then: by it alone the host's clock would read
	// behind, and a send after it would gain the copy's age by the next
	// fresh answer (hostGains).
	c.clocks.learn(req.URL.Host, aged(headerValue(resp.Header, "Date"), resp.Header["Age"]), end)
	ra, ok := ParseRetryAfterHeader(resp.Header, end)
	if !ok && resp.StatusCode == http.StatusTooManyRequests {
		ra, ok = rateLimitReset(resp.Header, end)
	}
	if ok && ra > 0 {
		ex.retryAfter = min(ra, c.cfg.retryAfterCap)
		ex.serverUntil = end.Add(min(ra, c.cfg.reconcileMax))
	}
	ex.dur = end.Sub(start)
	return ex
}

// sentURLOut returns err with the URL as sent (sent, and shown as net/http
// shows it) replaced by the journaled one in its text: a Transport that
// wraps net/http's quotes the URL in its own error (hashicorp/
// go-retryablehttp's RoundTripper: "POST <URL> giving up after N
// attempt(s): Post "<URL>": ..."), and the request hook may have put a
// credential in it. secrets are other values added at send time (the
// credential headers' values), blanked wherever the text quotes them.
// err is returned as is when its text quotes none.
func sentURLOut(err error, journaled, shown string, sent *url.URL, secrets ...string) error {
	text := err.Error()
	replaced := text
	// net/http shows a password as ***, url.URL.Redacted as xxxxx; and
	// url.Error quotes the URL with %q, which escapes a '"' or '\' in its
	// query (a search filter's quotes: Stripe's
	// query=metadata["order_id"]:"6735").
	for _, form := range [...]string{sent.String(), shown, sent.Redacted()} {
		if form == "" || form == journaled {
			continue
		}
		for _, f := range [...][2]string{{form, journaled}, {httpsyntax.QuotedForm(form), httpsyntax.QuotedForm(journaled)}} {
			if strings.Contains(replaced, f[0]) {
				replaced = strings.ReplaceAll(replaced, f[0], f[1])
			}
		}
	}
	// What is left of the credentials in a form not known here (its own
	// escaping, a redirect's URL that echoes the query): never journaled,
	// whatever the form.
	replaced = httpsyntax.RedactSecretsIn(replaced, append(httpsyntax.SecretValues(sent), secrets...)...)
	if replaced == text {
		return err
	}
	return &shownTransportError{msg: replaced, err: err}
}

// sentSecrets returns the credentials req carries, its URL's path and
// query having been path and rawQuery before the request hook: the values
// of its credential headers but the key's (credentialValues), its URL's
// (SecretValues), those of the query parameters the hook added (a key
// under a name of the API's own, as README advises: Google's key=,
// cloud.google.com/docs/authentication/api-keys-use), and the path
// segments the hook added (a token in the path: Telegram's
// /bot<token>/METHOD, core.telegram.org/bots/api#making-requests).
func sentSecrets(path, rawQuery, keyHeader string, req *http.Request) []string {
	secrets := append(credentialValues(req.Header, keyHeader), httpsyntax.SecretValues(req.URL)...)
	secrets = append(secrets, httpsyntax.AddedParamValues(rawQuery, req.URL.RawQuery)...)
	if req.URL.Path == path {
		return secrets
	}
	was := strings.Split(path, "/")
	for _, seg := range strings.Split(req.URL.Path, "/") {
		if !slices.Contains(was, seg) {
			secrets = append(secrets, seg)
		}
	}
	return secrets
}

// blankSent blanks the credentials the request carried (ex.sent) in
// what is recorded of the exchange, its journaled attempt and settlement,
// the log and the attempt hook: the answer's body, its error, and out's
// reason (the judge's, read from the answer). A server may quote a
// credential it refuses: "Key <key> not found" (the US EPA's CTX APIs,
// github.com/USEPA/ctxR/issues/32), a short Stripe key named whole, a
// debugging 400 that shows the Authorization header. The judge reads the
// answer as it came: blanked, a value of the request's body that happens
// to be the credential would no longer match the answer's.
func (ex *exchange) blankSent(out *Outcome) {
	if len(ex.sent) == 0 {
		return
	}
	sent := httpsyntax.NewValues(ex.sent...)
	out.Reason = sent.Blank(out.Reason)
	if ex.err != nil {
		if text := ex.err.Error(); sent.MayHold([]byte(text)) {
			words := judgeWords(text)
			if blanked := text[:words] + sent.Blank(text[words:]); blanked != text {
				ex.err = &shownTransportError{msg: blanked, err: ex.err}
			}
		}
	}
	if sent.MayHold(ex.body) {
		// A copy, and only of a body that changes: the answer the judge
		// read is left as it came.
		if blanked := sent.Blank(string(ex.body)); blanked != string(ex.body) {
			ex.body = []byte(blanked)
		}
	}
}

// judgeWords is the length of the judge's words that text begins with,
// which pastOf reads back from the journaled attempt (conflictAfterSend,
// stateAfterSend, inFlightAfterSend, copyClaimedWords, orderHeld's): a
// credential that is one of their words (a Basic user "a", or "idem")
// must leave them as written, or the refusals after a send are counted
// otherwise, and an order said to be paid or to exist is never failed by
// the result endpoint's "not found".
func judgeWords(text string) int {
	for _, w := range [...]string{conflictAfterSend, stateAfterSend, inFlightAfterSend, copyClaimedWords, orderPaidWords, orderExistsWords, versionMovedWords} {
		if strings.HasPrefix(text, w) {
			return len(w)
		}
	}
	return 0
}

// credentialValues returns the values of h's credential headers, and of
// each the part after its scheme ("Bearer <token>"): the forms an error
// may quote them in. Basic credentials are quoted as the hook knows them,
// decoded: the pair, the password (Razorpay's key secret) and the
// username when it is the key, sent with no password (Stripe's,
// docs.stripe.com/api/authentication), or long enough to be one. A short
// one beside a password is a name (Mailgun's "api"): blanked, every "api"
// a server writes would go, its host's name among them.
//
// The key's header (keyHeader) is none, however it is named: AWS's
// X-Amzn-Client-Token ends as a token's name does, and the key it
// carries, journaled with the operation, is what a person reads a
// refusal for ("Value '<key>' at 'clientToken' failed to satisfy
// constraint").
func credentialValues(h http.Header, keyHeader string) []string {
	var vs []string
	for name, values := range h {
		if name == keyHeader || !httpsyntax.CredentialHeader(name) {
			continue
		}
		for _, v := range values {
			vs = append(vs, v)
			scheme, token, ok := strings.Cut(v, " ")
			if token = strings.TrimSpace(token); !ok || token == "" {
				continue
			}
			vs = append(vs, token)
			if !strings.EqualFold(scheme, "Basic") {
				continue
			}
			if pair, err := base64.StdEncoding.DecodeString(token); err == nil {
				user, pass, _ := strings.Cut(string(pair), ":")
				vs = append(vs, string(pair), pass)
				if pass == "" || len(user) >= 8 {
					vs = append(vs, user)
				}
			}
		}
	}
	return vs
}

// journaledURL is the URL an attempt of rec was built from, as journaled:
// the result endpoint's for a query, else the operation's.
func journaledURL(rec *journal.Record, query bool) string {
	if query {
		return rec.QueryURL
	}
	return rec.URL
}

// shownTransportError is a transport error shown with other text. It
// answers Timeout and Temporary as the error does: url.Error asks its
// Err directly, not through Unwrap.
type shownTransportError struct {
	msg string
	err error
}

func (e *shownTransportError) Error() string { return e.msg }
func (e *shownTransportError) Unwrap() error { return e.err }

func (e *shownTransportError) Timeout() bool {
	t, ok := e.err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

func (e *shownTransportError) Temporary() bool {
	t, ok := e.err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// attemptTrace is what net/http's trace hooks saw of one attempt. The
// hooks may run on net/http's own goroutines, even after Do returned.
//
// "Never sent" and "maybe sent" are told apart by what net/http saw, not
// by error text. net/http may itself resend a request carrying an
// Idempotency-Key on a reused connection that died before any response:
// the same bytes and key, so the server de-duplicates it.
type attemptTrace struct {
	wrote  atomic.Bool  // written whole, or answered
	traced atomic.Bool  // net/http took the request (GetConn)
	conns  atomic.Int32 // connections that had the request
	// resent: net/http began another copy after one written whole over
	// HTTP/1 (or a protocol not known to be HTTP/2), which may have
	// executed. On HTTP/2 net/http sends a copy again only after the
	// server said the first was not processed: a GOAWAY whose last stream
	// is below it (RFC 9113 6.8) or a REFUSED_STREAM (8.7), or when it
	// could not be written; and after a PROTOCOL_ERROR reset, Go's
	// server's refusal of a stream over its limit (golang/go#47635). An
	// earlier HTTP/2 copy is no earlier send: a replayed answer to a first
	// attempt stays another request's, and a refusal the operation's. The
	// cost: a server that ran a stream and then reset it PROTOCOL_ERROR
	// would have the replay of our own order flagged ReviewKeyInUse for a
	// person, not settled. Judged per copy: one attempt's copies may go
	// over HTTP/1 and HTTP/2 to a host whose nodes differ.
	resent atomic.Bool
	// h2: the copy being sent goes over HTTP/2, told by its pseudo-header
	// fields (RFC 9113 8.3), which only HTTP/2 writes, so cleartext HTTP/2
	// (h2c) and a connection wrapped by a custom dialer count too; or by
	// a TLS connection that negotiated h2, for a transport that does not
	// report its header fields. Reset at each copy's end.
	h2 atomic.Bool
	// h1Sent: a copy written whole earlier did not go over HTTP/2.
	h1Sent atomic.Bool
	// sentWhole: a copy was written whole, over either protocol.
	sentWhole atomic.Bool
	// answered: an answer came to the copy on the connection net/http
	// got last (a 307 or 308 it follows); not a 1xx (interimResponse).
	answered atomic.Bool
	// interim counts the attempt's informational responses
	// (interimResponse).
	interim atomic.Int32
	// stop, set on a send sentOnce guards whose body is empty, ends the
	// attempt's context with errSentOnce when a copy begins (GotConn)
	// after one written whole over HTTP/2 and not answered: net/http's
	// HTTP/2 transport resends an empty request (NoBody) after a reset
	// without asking GetBody, and it checks the context before it writes
	// a stream's headers (encodeAndWriteHeaders), so the copy never goes
	// out. Not after an HTTP/1 copy: net/http may write that one before
	// it sees the context end; hideReplayKey stops its resend instead.
	stop  context.CancelCauseFunc
	hooks httptrace.ClientTrace
	// room holds the submit's request's URL and body reader when its
	// URL's parse was cached (parsedURL.newRequest): allocated with the
	// trace, which every attempt makes, rather than each on its own.
	room requestRoom
	// values is the room for the request header's values (copyHeader):
	// a body's Content-Type, the key and one more, in the trace's
	// allocation rather than one of their own.
	values [3]string
}

// errSentOnce is what net/http's resend of a request sent once gets
// instead of its body (attemptTrace.sentOnce).
var errSentOnce = errors.New("idem: the request was written and its answer lost (connection died, or stream reset); not resent, as the endpoint may not de-duplicate by the key")

// sentOnce is getBody, but failing once a copy was written whole and no
// answer came: net/http rewinds the body to resend it on a fresh HTTP/1
// connection, or after an HTTP/2 stream's reset, and the copy written
// may have executed. Over HTTP/2 it resends after REFUSED_STREAM or a
// GOAWAY below the stream, which say the copy was not processed (RFC
// 9113 8.7), but also after a peer's PROTOCOL_ERROR (golang/go#47635),
// which says nothing of whether the stream ran, and the trace cannot
// tell them apart: to an endpoint that ignores the key, the copy is a
// second order. A refused stream so stopped is a lost answer like any
// other, judged by idem under the same key and bytes. Not a copy never
// written whole, nor one that follows a 307 or 308: whoever answers the
// same bytes again there, none of ours executed twice. nil stays nil.
func (t *attemptTrace) sentOnce(getBody func() (io.ReadCloser, error)) func() (io.ReadCloser, error) {
	if getBody == nil {
		return nil
	}
	return func() (io.ReadCloser, error) {
		if t.sentWhole.Load() && !t.answered.Load() {
			return nil, errSentOnce
		}
		return getBody()
	}
}

// hideReplayKey moves the fields net/http reads as "this request may be
// sent again" (Request.isReplayable looks up Idempotency-Key and
// X-Idempotency-Key by their exact spelling) to their lower-case names,
// which it does not look up: a copy of an empty request written whole on
// a reused HTTP/1 connection that dies is then not resent, while one
// never written still is. The server reads the same field, its name
// case-insensitive (RFC 9110 5.1) and in lower case over HTTP/2 anyway.
func hideReplayKey(h http.Header) {
	for _, n := range [...]struct{ name, lower string }{{"Idempotency-Key", "idempotency-key"}, {"X-Idempotency-Key", "x-idempotency-key"}} {
		v, ok := h[n.name]
		if !ok {
			continue
		}
		delete(h, n.name)
		if w, ok := h[n.lower]; ok {
			v = append(w, v...)
		}
		h[n.lower] = v
	}
}

// maxInterim bounds an attempt's informational responses: net/http
// bounds them by their size only while no Got1xxResponse hook is set. A
// server has use for one or two (100 Continue, 103 Early Hints).
const maxInterim = 8

// errTooManyInterim fails a copy given more than maxInterim
// informational responses.
var errTooManyInterim = errors.New("idem: too many informational (1xx) responses")

// interimResponse is the Got1xxResponse hook of a send sentOnce guards.
// net/http reports a 1xx as the copy's first response byte, but it is no
// answer (RFC 9110 15.2: an interim response, "prior to completing the
// requested action and sending a final response"), and over HTTP/2 a
// reset may follow it, after which net/http resends the copy: to an
// endpoint that ignores the key, a second order. The copy stays
// unanswered. The final answer after a 1xx fires no hook, so a 307 or
// 308 after one may be judged a lost answer rather than read: net/http
// asks for the body before CheckRedirect returns the 3xx, and whether
// the copy's WroteRequest has fired by then is a race over HTTP/2. Both
// readings are safe; neither sends the key elsewhere.
func (t *attemptTrace) interimResponse(int, textproto.MIMEHeader) error {
	t.answered.Store(false)
	if t.interim.Add(1) > maxInterim {
		return errTooManyInterim
	}
	return nil
}

func newAttemptTrace() *attemptTrace {
	t := &attemptTrace{}
	t.hooks = httptrace.ClientTrace{
		GetConn: func(string) { t.traced.Store(true) },
		// Once a connection has the request it may be on the wire: net/http
		// writes it on another goroutine and, when the attempt's context
		// ends, can return before WroteRequest fires (so can a transport
		// wrapper that times out). Only a request no connection ever had
		// is surely unsent.
		GotConn: func(info httptrace.GotConnInfo) {
			if t.stop != nil && t.sentWhole.Load() && !t.answered.Load() && !t.h1Sent.Load() {
				t.stop(errSentOnce)
			}
			t.conns.Add(1)
			t.answered.Store(false)
			// Another copy begins: net/http has finished writing the one
			// before (it waits for its writer to end before resending).
			// This copy's own WroteRequest may come only after its answer,
			// even after Do returned, so it cannot be what tells.
			if t.h1Sent.Load() {
				t.resent.Store(true)
			}
			c, ok := info.Conn.(interface{ ConnectionState() tls.ConnectionState })
			t.h2.Store(ok && c.ConnectionState().NegotiatedProtocol == "h2")
		},
		WroteHeaderField: func(name string, _ []string) {
			if strings.HasPrefix(name, ":") {
				t.h2.Store(true)
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			t.wrote.Store(true)
			h2 := t.h2.Swap(false)
			if info.Err != nil {
				return
			}
			// A wrapper that resends after its own timeout may begin a
			// copy before net/http says the one before was written.
			if t.h1Sent.Load() {
				t.resent.Store(true)
			}
			t.sentWhole.Store(true)
			if !h2 {
				t.h1Sent.Store(true)
			}
		},
		GotFirstResponseByte: func() {
			t.wrote.Store(true)
			t.answered.Store(true)
		},
	}
	return t
}

// submitOnlyHeader reports whether the journaled header name (canonical)
// describes the submit's body or makes it conditional on its target, so
// that a result query must not carry it.
func submitOnlyHeader(name string) bool {
	switch name {
	case "Range", "Expect", "Digest", "Repr-Digest", "X-Http-Method-Override", "X-Http-Method", "X-Method-Override":
		return true
	}
	return strings.HasPrefix(name, "Content-") || strings.HasPrefix(name, "If-")
}

// readableCodings reports whether the Accept-Encoding values offer only
// codings idem decodes (gzip and identity), or others only with q=0.
func readableCodings(vals []string) bool {
	for _, v := range vals {
		for tok := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "", "gzip", "x-gzip", "identity":
				continue
			}
			if !refusedCoding(params) {
				return false
			}
		}
	}
	return true
}

// refusedCoding reports whether a coding's parameters give it q=0: "not
// acceptable".
func refusedCoding(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// copyHeader copies src's values into dst, all in one backing array
// (as http.Header.Clone does): the request hook may change dst, never the
// journaled record. It leaves room in the array for spare more values and
// returns it (empty, with capacity spare); every slice it puts in dst has
// its capacity capped, so an append to one never lands in another. The
// array is room when they fit in it (the attempt's trace's), else a new
// one.
func copyHeader(dst, src http.Header, spare int, room []string) []string {
	n := spare
	for _, vals := range src {
		n += len(vals)
	}
	var all []string
	if n <= len(room) {
		all = room[:0:n]
	} else {
		all = make([]string, 0, n)
	}
	for name, vals := range src {
		all = append(all, vals...)
		dst[name] = all[len(all)-len(vals) : len(all) : len(all)]
	}
	return all[len(all):len(all):n]
}

// maxSizeHint bounds the buffer readAtMost makes from a Content-Length
// before reading: a larger body grows it as it comes.
const maxSizeHint = 32 << 10

// readAtMost is io.ReadAll(io.LimitReader(r, n)), with a first buffer
// sized from the Content-Length (size; -1 when unknown) instead of
// ReadAll's 512 bytes: most answers are a few dozen bytes.
func readAtMost(r io.Reader, n, size int64) ([]byte, error) {
	first := int64(512)
	if size >= 0 && size < maxSizeHint {
		first = size + 1 // room for the read that finds EOF
	}
	b := make([]byte, 0, min(first, n))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append pick the growth
		}
		room := b[len(b):min(int64(cap(b)), n)]
		k, err := r.Read(room)
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// sfStringEscaper escapes an RFC 8941 sf-string: checkName already limited
// keys to visible ASCII, so only the quote and the backslash need escaping.
// Built once: keyValue runs on every submit.
var sfStringEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

func (c *Client) keyValue(key string) string {
	if c.cfg.keyFormat == KeyQuoted {
		return sfString(key)
	}
	return key
}

// sfString is key as an RFC 8941 sf-string, the IETF draft's form.
func sfString(key string) string { return `"` + sfStringEscaper.Replace(key) + `"` }

// step is one attempt's judgment as the loop sees it.
type step struct {
	judgment
	retryAfter time.Duration
}

// submit sends the operation once. The attempt is journaled before the
// request is built, and its outcome (with any settlement) after.
func (d *driver) submit() (step, error) {
	c := d.c
	committed := !d.preRecorded
	if d.preRecorded {
		d.preRecorded = false
	} else {
		now := d.now()
		if err := d.commit(func(r *journal.Record) {
			closeOpenAttempts(r)
			// The key window starts with the first attempt that may
			// execute: one after attempts that surely did not starts it
			// afresh, or the window would be spent before the key was ever
			// executed (see keyWindow).
			fresh := !pastOf(r, math.MaxInt).maybeExecuted
			r.Attempts = append(r.Attempts, journal.Attempt{Number: attemptCount(r) + 1, Kind: journal.AttemptSubmit, Start: now})
			if r.FirstSent.IsZero() || fresh {
				r.FirstSent = now
			}
		}); err != nil {
			return step{}, err
		}
	}
	if !d.keyIgnored {
		// A first send too needs the endpoints an earlier process
		// learnt ignore the key (its flagged open operations): sent as
		// to one that de-duplicates, net/http's own resend of it on a
		// dead reused connection is a second charge there. Read once
		// per Client: Submit reads them before it journals, Do of a
		// prepared operation here.
		c.ignoringLearntFirst(d.ctx)
	}
	number := attemptCount(d.rec)
	if block := d.blockSince(committed, number); block != nil {
		// Not sent, and closed as such (flag, handoff, leave): the flag
		// is kept as it was written.
		d.preRecorded = true
		switch {
		case block.reason != "":
			return step{}, d.flag(block.reason, block.cause)
		case d.ctx.Err() != nil:
			return step{}, d.leave(context.Cause(d.ctx))
		}
		return step{}, d.handoff(block.cause, time.Time{})
	}
	// The lease is held again, by its token, as the request goes: the
	// process may have been frozen since the attempt's commit (a VM
	// paused, kill -STOP) past the lease's end, and another replica,
	// finding the attempt maybe sent, resent it meanwhile. Writes alone
	// are fenced; this send, going out after that one, was a second
	// charge at an endpoint that reads no key. A lease with time left
	// costs no journal call.
	if err := d.hold(d.now(), c.cfg.attemptTimeout); err != nil {
		d.preRecorded = true // not sent
		return step{}, d.unheld(err)
	}
	d.exchanges++
	d.submits++
	d.keyIgnored = d.keyIgnored || c.ignoring.has(d.rec)
	// Still unread (another caller's walk under way, or failed): once.
	// So too to an endpoint not heard from yet (heardEndpoints).
	once := resendFree
	if d.keyIgnored || !c.ignoring.learnt.Load() || !c.heard.has(d.rec) {
		once = sendOnce
	}
	ex := c.send(d.ctx, d.rec, false, once)
	d.serverUntil = ex.serverUntil
	d.hookChanged, _ = ex.err.(*hookChangeError)

	d.answerHeader = ex.header
	a := c.answerOf(d.rec, ex, false)
	d.answerHeader = nil
	if !a.keyIgnored && heardFrom(ex.status) {
		c.heard.add(d.rec)
	}
	learnt := a.keyIgnored && !d.keyIgnored
	if learnt {
		c.ignoring.add(d.rec)
	}
	d.keyIgnored = d.keyIgnored || a.keyIgnored
	a.keyIgnored = d.keyIgnored
	if a.orderPaid && a.keyIgnored {
		// "Order already paid" unmarked (a layer in front of the
		// endpoint's idempotency middleware answered it) from an endpoint
		// known to ignore the key: read as a key-keeping server's, the
		// result endpoint's answer about the order was taken as about
		// our key. The order's, whoever paid it, maybe a copy of ours
		// (copyClaimed), as the marked 409 is.
		a.orderPaid, a.copyMade = false, true
	}
	p := pastOf(d.rec, number)
	if p.contested && a.otherRequest == "" && !a.stored() &&
		(a.verdict == Settled && a.decodeErr == nil && a.out.State != StateFailed || a.verdict == Processing && a.status >= 200 && a.status < 300) {
		// After a 409 said another request held the key, a success, or a
		// classifier's 2xx "accepted", may be that request's stored
		// answer, unmarked: compared with ours as heldOrderAnswer's is,
		// whether it names the key or not.
		a.otherRequest, a.otherFixed = otherRequestOf(d.rec, ex.body)
	}
	st := step{judgment: judgeSubmit(p, a), retryAfter: ex.retryAfter}
	if st.err != nil {
		ex.err = st.err
	}
	ex.blankSent(&st.out)
	if learnt && st.review != ReviewKeyIgnored {
		// The endpoint learnt from this answer is journaled (or, failing
		// that, its other open operations flagged) before the unflagged
		// outcome is (keepLearnt); a flag tells the next process itself.
		// Within wctx, not the caller's context, as the outcome's commit
		// is: a caller that gave up would have it committed first.
		if !c.keepLearnt(d.wctx, d.rec) {
			// Neither done (the journal stalled or failing): committed
			// settled and unflagged, the outcome left nothing to tell a
			// process killed meanwhile, whose Resume resent the others.
			// Left open and flagged, it tells it; its attempt keeps the
			// answer for a query, a Confirm or a person.
			st.move, st.label, st.review = moveReview, "key_ignored", ReviewKeyIgnored
		}
	}
	// What the commit reads, copied into one allocation: captured by the
	// closure one by one, ex, a and st were each moved to the heap. Nothing
	// changes them from here until the commit returns, so the copies are
	// what the closure read (TestSubmitAllocations).
	end := &submitEnd{ex: ex, st: st, number: number, stored: a.stored(), now: d.now()}
	err := d.commitEnd(end)
	// The committed record's Result is end's: it need not keep the
	// answer's header, error and credentials alive with it.
	end.ex, end.st = exchange{}, step{}
	return d.endAttempt(st, number, ex, false, err)
}

// submitEnd is what a submit's answer journals: its attempt's outcome and
// what the judgement made of it.
type submitEnd struct {
	ex     exchange
	st     step
	number int
	stored bool // the answer was a stored one (answer.stored)
	now    time.Time
	// updated is the commit's time, Updated's (commitChange sets it
	// before the store may call write).
	updated time.Time
	// unread: the drive did not read the record flagged ReviewKeyIgnored
	// (commitChange's).
	unread bool
	// result is the settlement's Result (settleRecord's room): in the
	// submit's one allocation rather than one of its own per settle. The
	// record committed points at it, so the commit's submitEnd is never
	// reused, and what else it holds is dropped once the commit returns.
	result journal.Result
}

// write is the store's fn of commitEnd: what commit's own closure does
// with apply.
func (e *submitEnd) write(r *journal.Record) error {
	return writeChange(r, e.apply, e.updated, e.unread)
}

// apply is the commit's change to the record.
func (e *submitEnd) apply(r *journal.Record) {
	ex, st := &e.ex, &e.st
	// A replay whose body was cut in transit is read again by a resend:
	// it does not make the answer final.
	recordOutcome(r, e.number, *ex, st.refused, e.stored && st.move != moveQuery)
	switch st.move {
	case moveSettle:
		settleRecord(r, st.out, *ex, e.stored, e.now, &e.result)
		if st.review != "" {
			setReview(r, st.review)
		}
	case moveProcessing:
		r.State = StateProcessing
		if st.out.ResourceID != "" {
			r.Result = &journal.Result{ResourceID: st.out.ResourceID, StatusCode: ex.status, Replayed: e.stored}
		}
	case moveReview:
		// Durable before anything else is tried: a crash now must not
		// leave the operation looking resendable.
		setReview(r, st.review)
	}
}

// blockSince judges again, just before the send of attempt number,
// what resendBlock judged before the attempt was journaled (committed:
// by this call; not the attempt Submit journaled with the record, which
// nothing has journaled over since).
//
// By the journal's flags (flagBlock, reviewOnlyBlock) on the record the
// commit read back, so costing no read: another process sharing the
// journal (a webhook handler's Confirm, several services on one
// PostgreSQL) writes them without this drive's lease, and its commit may
// have landed between resendBlock's judgement and this attempt's. A
// Confirm's contradiction (ReviewConfirmConflict: the event names
// another resource for the key, which a server that lost the key made)
// ends any drive's resends, as it would have one judged
// after it; ReviewKeyIgnored is the endpoint's, which this process may
// not know: learnt from it (relearn).
//
// And by what this process learnt of the endpoint meanwhile: another
// operation's answer to it may have come while this attempt was
// journaled, and what may have executed would execute again. Or what
// the journal's endpoints say, read again after the commit (one read per
// resend of what may have executed, to an endpoint not known): another
// replica's save of it does not flag this record. A block with no
// reason (the read failed) is handed off unsent, as resendBlock's is.
func (d *driver) blockSince(committed bool, number int) *blocked {
	c := d.c
	var block *blocked
	if committed {
		if block = d.flagBlock(pastOf(d.rec, number)); block == nil {
			block = d.reviewOnlyBlock()
		}
	}
	if block != nil && block.reason == ReviewKeyIgnored {
		c.ignoring.relearn(d.rec)
	}
	if block != nil || d.keyIgnored || !pastOf(d.rec, number).maybeExecuted {
		return block
	}
	if committed && !c.ignoring.has(d.rec) {
		// The journal's endpoints, read again now that the attempt is
		// journaled: another replica's save of the endpoint (learnt from
		// another payment's answer, its open operations left unflagged)
		// may have committed since resendBlock read them, and the resend
		// was a second charge there. What commits after this read came
		// after the attempt, as a send's answer would.
		if err := c.keptIgnoring(d.ctx); err != nil {
			return &blocked{cause: &journalError{err}}
		}
	}
	if c.ignoring.has(d.rec) {
		return &blocked{ReviewKeyIgnored, ErrNeedsReview}
	}
	return nil
}

// cacheNamesKey reports whether a cache's answer to a result query names
// rec's key, so is the key's own result if stale: an echoed key header
// (a cache stores it with the answer it came on), or, when the key goes
// in a header, a body member named as a key holding it (holdsKey), a key
// taken from a business id being a value other resources carry (a
// refund's order_id, a description). Not the request's own reference at
// its member, which a 409 replay may show (namesRequest): the server
// answered that for our key, but a cache keyed on less than the URL
// serves any key's result, and an order retried under a new key after
// a decline carries the same reference. With the key in the body, a
// client order id, the answer echoes it under a name of its own
// ("clientOrderId" for Binance's newClientOrderId, OKX's clOrdId) that
// no rule here knows: its value anywhere in the body.
func (c *Client) cacheNamesKey(rec *journal.Record, ex exchange) bool {
	if c.cfg.keyHeader == "" {
		return namesKeyValue(ex.header, ex.body, "", rec.Key)
	}
	return namesKeyValue(ex.header, nil, c.cfg.keyHeader, rec.Key) || holdsKey(ex.body, rec.Key, c.cfg.keyHeader)
}

// redirectNamesKey reports whether a submit's 302 or 303 names rec's key
// as the API's answer for it does: an echoed key header, or the key at a
// member named as a key (keyMember, the request's own member for a key in
// the body) of the body's resource, at its top level or in its envelope's
// one (resources). Not the key anywhere in the body, as cacheNamesKey
// takes it of a result query's answer, which is about the key: a front's
// login or challenge redirect may quote the request it keeps (the key
// inside it), and a short key is another order's value at another member.
func (c *Client) redirectNamesKey(rec *journal.Record, ex exchange) bool {
	if c.cfg.keyHeader != "" && namesKeyValue(ex.header, nil, c.cfg.keyHeader, rec.Key) {
		return true
	}
	return resourceHoldsKey(ex.body, rec.Key, c.bodyKeyName(rec))
}

// answerMarks reads h once for the names fromCache, replayed and
// keyIgnored look up: most answers carry none of them, and one pass
// rules them all out, where looking each name up was ~25 map reads per
// answer. cached is fromCache's word, "" when unmarked.
func answerMarks(h http.Header) (marked bool, cached string) {
	if marked = markedAnswer(h); marked {
		cached = fromCache(h)
	}
	return marked, cached
}

// submitIgnoresKey is whether a submit's answer, marked and cached as
// answerMarks read them, says the endpoint ignores the key: a cache's
// copy of one speaks for the cache, not for the server.
func submitIgnoresKey(h http.Header, marked bool, cached string) bool {
	return marked && cached == "" && keyIgnored(h)
}

// answerOf prepares an exchange for the judge: the classifier's verdict
// and, for a 2xx that may settle, the decoder's outcome.
func (c *Client) answerOf(rec *journal.Record, ex exchange, query bool) answer {
	// Over the cap is not "cut": a stored answer over the cap is over it
	// on every replay, and reading it again changes nothing.
	a := answer{status: ex.status, unsent: ex.unsent, resent: ex.resent, cut: ex.err != nil, tooLarge: ex.tooLarge, body: ex.body}
	if ex.status == 0 {
		return a
	}
	marked, cached := answerMarks(ex.header)
	switch {
	case !query && cached == "":
		a.replayed = marked && replayed(ex.header, ex.status)
		var collection string
		a.created, a.createdStatus, collection = createdResource(ex.status, ex.body)
		if a.created != "" {
			// Primer answers a refund's key already processed with the
			// payment refunded: POST /payments/{id}/refund's 409 names
			// {id} and that payment's status, whatever became of the
			// refund.
			segs := pathSegments(rec.URL, rec.Key)
			a.actedOn = slices.Contains(segs, a.created)
			// Moov's 409 is the key's transfer whole, and its keys are
			// per account: a service sharing it, or a key taken from a
			// business id, gets another request's transfer in it.
			a.otherRequest, a.otherFixed = otherRequest(rec.Body, ex.body, segs)
			if acted := memberActedOn(segs, collection); a.otherRequest == "" && !a.actedOn && acted != "" {
				// So is a refund's naming a payment other than the one
				// its path names (POST /payments/{id}/refund): the key's
				// request acted on another, and ours was ignored.
				a.otherRequest, a.otherFixed = fmt.Sprintf("id %q under %s, not %q, the one this request's path names", clipValue(a.created), collection, clipValue(acted)), true
			}
		}
		a.keyIgnored = submitIgnoresKey(ex.header, marked, cached)
	case query && cached != "" && !c.cacheNamesKey(rec, ex) && !pathNamesKey(rec.QueryURL, rec.Key):
		a.otherCache = true
	}
	if query {
		a.cached = cached
	}
	a.verdict, a.location = c.verdict(ex.status), headerValue(ex.header, "Location")
	if a.verdict == Rejected && ex.status == http.StatusBadRequest && throttledAnswer(ex.header, ex.body) {
		a.verdict = Throttled
	}
	if a.verdict == Rejected && outcomeUnknown(ex.body) {
		// OKX's 400 50004, "does not mean that the request was
		// successful or failed": a timeout, not a refusal.
		a.verdict = Ambiguous
	}
	if !query && !a.stored() && a.verdict == Ambiguous {
		if a.redirect = routerRedirect(rec.URL, ex.sentQuery, ex.status, ex.header); a.redirect != "" {
			a.verdict = Rejected
		}
	}
	name := c.keyName(rec, ex.status)
	a.verdict = reusedVerdict(a.verdict, ex.status, ex.body, name)
	if a.keyIgnored && ex.status == http.StatusConflict && (a.verdict == Processing || a.verdict == Conflict) {
		// The endpoint does not read the key: its 409 is about no
		// request holding the key, in flight or done, but its own
		// refusal of this one, a conflict with the target's state (RFC
		// 9110 15.5.10): nothing executed. Read as another request's in
		// flight, it was resent, and the resend executed what the
		// endpoint had refused. Unless its words say the order's
		// payment runs, or the order exists, is a duplicate or was
		// paid: what they refer to may be a copy of this very request
		// (a mesh's retry of it), which the endpoint executed as it
		// executes every copy (copyClaimed).
		switch {
		case saysSubjectRunning(ex.body):
			a.copyRuns = true
		case saysDuplicateTo(rec, ex.body, name):
			a.copyMade, a.verdict = true, Rejected
		default:
			a.verdict = Rejected
		}
	}
	if !query && !a.keyIgnored && !a.stored() && c.cfg.keyHeader != "" && !slices.Contains(c.cfg.conflictStatus, ex.status) {
		paid, exists := paidRefusal(rec, a.verdict, ex.status, ex.body, name)
		if a.verdict == Rejected && ex.status == http.StatusPreconditionFailed && ex.ifAbsent {
			// A create-only request's 412 is its "already exists" in
			// standard form, and what exists may be a copy of ours.
			paid, exists = true, true
		}
		if paid {
			// "Order already paid" from a server that keeps the key, or
			// its 409 "Order already exists" to a create: the order's
			// state, neither the key in flight, resent until the key
			// window, nor the key reused. To a payment or a create, what
			// paid or made the order may be ours (orderPaidMeaning); to a
			// cancel or a refund (changesState), no copy of it paid, as
			// for a 400.
			a.orderPaid, a.orderExists, a.verdict = exists || !changesState(rec.URL, rec.Key), exists, Rejected
		}
	}
	a.versionMoved = !query && a.verdict == Rejected &&
		(ex.status == http.StatusConflict && versionConflict(ex.body) || ex.status == http.StatusPreconditionFailed && ex.ifVersion)
	if a.inFlight = refusalInFlight(a.verdict, ex.status, ex.header, ex.body, name); !a.inFlight && !a.orderPaid {
		a.keyConflict = c.keyConflict(a.verdict, ex.status, ex.body, name, rec)
		a.differs = a.keyConflict && (slices.Contains(c.cfg.conflictStatus, ex.status) || saysRequestDiffers(ex.body, name))
		if !a.keyConflict && !query && !a.stored() && c.cfg.keyHeader != "" &&
			(a.verdict == Conflict || a.verdict == Rejected && ex.status == http.StatusBadRequest) && saysDuplicateTo(rec, ex.body, c.cfg.keyHeader) {
			// With the key in a header, a 400 or 422 saying the order in
			// the body is a duplicate (dLocal's 5009 "Order ID is
			// duplicated.", Toss's DUPLICATED_ORDER_ID and
			// ALREADY_PROCESSED_PAYMENT) comes from a server that checks
			// the order id before, or without, its idempotency store: the
			// order it holds may be a copy of ours (a mesh's retry of a
			// 503, net/http's resend), as WPG's 2xx "Duplicate Order" may
			// be. Weighed as the key's "already used", never as saying this
			// request differs (a.differs): any "different" in it is about
			// the order id to use next.
			a.keyConflict = true
		}
	}
	if !query && cached == "" && !a.stored() && ex.status == http.StatusConflict && a.verdict == Processing &&
		!saysKeyRunning(ex.body, c.bodyKeyName(rec)) && !saysSubjectRunning(ex.body) && !carriesError(ex.body) {
		// A 409 that is the key's first answer as it was (Interchecks,
		// DOKU), judged as a resource the key created (conflictReplay);
		// not one saying the order's payment runs, whose resource may
		// be the order's last, finished, payment.
		if a.created, a.createdStatus = c.conflictReplay(rec, ex); a.created != "" {
			a.otherRequest, a.otherFixed = otherRequestOf(rec, ex.body)
		}
	}
	if query && saysAny(ex.body, "found", "exist", "such") {
		// Only words of a "not found" can name something else missing:
		// a 2xx result is not split into words for nothing.
		a.otherMissing = missingOther(ex.body, rec.URL)
	}
	// A 302 or 303 to a submit naming the key may be the API's own
	// answer to the request it ran: PayU GPO answers an order create 302,
	// Location set to the buyer's redirectUri and the order in the body
	// (developers.payu.com/en/restapi.html); a 303 says the request was
	// processed (RFC 9110 15.4.4). Read, it settles what it says
	// succeeded or runs; unread, the made order was resent until the
	// server's refusals of its id left it for a person. Only one naming
	// the key (redirectNamesKey): a Decoder written for 2xx may read any
	// JSON as the order, and a login page's or a moved API's redirect
	// names no key of ours. Nor the request handed back (a front
	// returning the request to send elsewhere), its own bytes or the same
	// JSON re-encoded (echoesRequest): it names the key where the request
	// does, and is no answer.
	orderRedirect := !query && cached == "" && !a.stored() && a.verdict == Ambiguous &&
		(ex.status == http.StatusFound || ex.status == http.StatusSeeOther) && ex.err == nil && !ex.tooLarge &&
		c.redirectNamesKey(rec, ex) && !echoesRequest(rec.Body, ex.body)
	if !orderRedirect && (ex.status < 200 || ex.status > 299 || !(query || a.replayed || a.verdict == Settled)) {
		return a
	}
	switch {
	case ex.err != nil:
		a.decodeErr = ex.err
	case ex.tooLarge:
		a.decodeErr = fmt.Errorf("%w: body over %d bytes", errUndecodable, c.cfg.maxResponse)
	case c.otherKeyEchoed(ex.header, rec.Key):
		// Servers that echo the key (Stripe's answers carry the
		// request's Idempotency-Key) name the request an answer is for.
		// Another key's is another request's answer: exchanges mixed up
		// by a proxy or a pooled connection, or a cache keyed on the URL
		// alone. Its body, however decodable, says nothing of this one.
		a.decodeErr = fmt.Errorf("%w: the answer's %s header names key %q, not %q", errUndecodable,
			c.cfg.keyHeader, truncate(ex.header.Get(c.cfg.keyHeader), 64), rec.Key)
	case !query && cached != "":
		// A shared cache that stores POST answers by URL (nginx's
		// proxy_cache_methods POST) answers every later request to the
		// URL with the first one's: another request's order, and this
		// one never reached the server. Its replay marker, if any, was
		// not read above for the same reason.
		a.decodeErr = fmt.Errorf("%w: the answer came out of a cache (%s), not from this request", errUndecodable, cached)
	case a.otherCache:
		a.decodeErr = fmt.Errorf("%w: a cache's answer (%s) that does not name key %q", errUndecodable, cached, rec.Key)
	default:
		ans := Answer{
			Scope: rec.Scope, Key: rec.Key, Method: rec.Method, URL: rec.URL, RequestBody: rec.Body,
			Query: query, StatusCode: ex.status, Header: ex.header, Body: ex.body, Replayed: a.replayed,
		}
		if c.cfg.decodeIsJSON {
			a.out, a.decodeErr = DecodeJSON(&ans) // keeps no pointer to it: ans stays on the stack
		} else {
			own := ans // a WithDecoder's may keep what it is given
			a.out, a.decodeErr = c.cfg.decode(&own)
		}
	}
	if orderRedirect {
		if a.decodeErr != nil || a.out.State != StateSucceeded && a.out.State != StateProcessing {
			// A redirect refuses nothing: its body's "failed" or an
			// unreadable one leaves it the ambiguous answer it was.
			a.out, a.decodeErr = Outcome{}, nil
			return a
		}
		a.verdict = Settled
	}
	if len(a.out.ResourceID) > recordable.MaxResourceID || len(a.out.Reason) > recordable.MaxReason {
		// A server's id or reason, however a decoder read it, is bounded
		// as an operator's are: every later write of the record rewrites
		// it, and every log line of the operation carries the id. Cut
		// here, not when settled, so that the id a later answer names is
		// compared with the one kept as it was kept.
		a.out.ResourceID = recordable.Clip(a.out.ResourceID, recordable.MaxResourceID)
		a.out.Reason = recordable.Clip(a.out.Reason, recordable.MaxReason)
	}
	if !query && !a.stored() && a.decodeErr == nil && a.out.State == StateFailed && (saysKeyRunning(ex.body, c.bodyKeyName(rec)) || saysSubjectRunning(ex.body)) {
		// A GraphQL mutation refused because the key's request still runs
		// comes 200 OK, a userError in its payload (Shopify's
		// IDEMPOTENCY_CONCURRENT_REQUEST, "This request is currently in
		// progress"), and a decoder that reads userErrors as the
		// mutation's refusals reads it as failed: but that request may
		// yet execute, and may be ours. It is the 409 of servers that
		// answer it otherwise. So is an API's 200 refusal saying the
		// payment is in progress, or its transaction locked by a request
		// that runs (PayU India's error_code 120).
		a.inFlight, a.out = true, Outcome{Reason: a.out.Reason}
	}
	if a.decodeErr == nil && a.out.State == StateFailed && graphQLInternalError(ex.body) {
		// A GraphQL API answers an internal error 200 OK in place of a
		// 500 (Shopify's INTERNAL_SERVER_ERROR, Braintree's errorClass
		// INTERNAL), and it may follow the mutation's commit; a decoder
		// that takes any top-level error for the request's failure
		// would have it made again. To a result query it is the query's
		// failure, not the operation's. Replayed, it is a stored 5xx: the
		// first request may have done the work before it.
		a.out, a.decodeErr = Outcome{}, fmt.Errorf("%w: the body is a GraphQL internal error, which may follow the work done", errUndecodable)
	}
	if a.decodeErr == nil && a.out.State == StateFailed && envelopeFault(ex.body) {
		// Kraken's "EGeneral:Internal error", 200 OK: a server's failure
		// in an envelope, as a GraphQL internal error is.
		a.out, a.decodeErr = Outcome{}, fmt.Errorf("%w: the body's error says the server failed, which may follow the work done", errUndecodable)
	}
	if query && errors.Is(a.decodeErr, ErrResultNotFound) && (graphQLRequestError(ex.body) || graphQLInternalError(ex.body) || envelopeFault(ex.body)) {
		// A Decoder that reads a lookup's missing list as empty says
		// "not found" of a request that searched for nothing: a GraphQL
		// request error (no data), a server's failure in an envelope.
		// Weighed as the endpoint's 404, the order placed under the key
		// in the body was placed again once the result lag had passed.
		a.decodeErr = fmt.Errorf("%w: a Decoder's not-found of an answer that is a request's error, which searched for nothing: %v", errUndecodable, a.decodeErr)
	}
	if query && a.decodeErr != nil && c.cfg.keyHeader == "" {
		a.foundOrder = foundOrder(ex.body, rec.Key)
	}
	if query && a.decodeErr != nil && ex.status >= 200 && ex.status < 300 {
		a.morePages = morePages(ex.header, ex.body)
	}
	if query && ex.status >= 200 && ex.status < 300 && (a.decodeErr == nil || a.foundOrder) ||
		!query && !a.stored() && a.decodeErr == nil && a.out.State != StateFailed && (orderRedirect || heldOrderAnswer(ex.status, ex.body, rec.Key)) ||
		!query && a.replayed && a.created == "" && a.decodeErr == nil && a.out.State != StateFailed {
		// A submit's success may be the key's order held before ours
		// (otherRequestAnswered), as a query's answer may be; so may a
		// 303 to the resource a POST "would be equivalent to" (RFC 9110
		// 9.3.3), the order another request left under the key. So may
		// a replayed 2xx (the only replay decoded here): a server that
		// answers a key it holds with its stored answer whatever the
		// body (Flutterwave's "original response associated with the
		// first request that used that key") replays another
		// request's success to a key that collided.
		a.otherRequest, a.otherFixed = otherRequestOf(rec, ex.body)
	}
	if !query && !a.stored() && (a.decodeErr == nil && a.out.State == StateFailed || c.cfg.keyHeader == "" && a.decodeErr != nil) {
		// The decoder's "failed" marks a refusal as an envelope's error
		// does: Kraken Futures answers "result": "success" whatever
		// became of the order, its refusal's name in sendStatus.status.
		envelope := c.cfg.keyHeader == "" && carriesError(ex.body)
		paid := false
		if c.cfg.keyHeader != "" && !a.keyIgnored && a.decodeErr == nil && !changesState(rec.URL, rec.Key) {
			// Weighed as a 4xx's refusal (Conflict), as below.
			paid, _ = paidRefusal(rec, Conflict, ex.status, ex.body, c.cfg.keyHeader)
		}
		switch {
		case paid:
			// "Order already paid" in a 200 from a server that keeps the
			// key in a header: its 409's or 400's meaning in another
			// envelope (orderPaidMeaning), not the key's "already used".
			a.verdict, a.orderPaid, a.out = Rejected, true, Outcome{Reason: a.out.Reason}
		case (envelope || a.decodeErr == nil) && saysDuplicateTo(rec, ex.body, c.bodyKeyName(rec)):
			// An API that answers every refusal 200 OK refuses a client
			// order id it holds so (Bybit's retCode 110072 "OrderLinkedID
			// is duplicate", OKX's sCode 51016 "Duplicated clOrdId",
			// KuCoin's clientOidDuplicated), and its decoder, which must
			// read the envelope's codes for any refusal to settle, takes
			// it for a failure: but the order under the id may be ours,
			// and "failed" invites it again under a new id. It is the 400
			// -2010 of Binance in another envelope, and weighed as one.
			// With the key in a header, a merchant reference is refused
			// so (WPG's orderCode, "Duplicate Order" in its XML reply)
			// when the idempotency store did not de-duplicate a copy: WPG
			// processes a request whose key it cannot check, and the copy
			// may be a mesh's retry of our first attempt whose answer the
			// mesh lost (Envoy's retry_on reset or 5xx). The words must be
			// about the order or request, or name the key's member or
			// header: not "duplicate line item". The decoder's reason
			// stays for the person deciding: it may be the only reading
			// of the refusal's words (refusalReason).
			a.verdict, a.keyConflict, a.out, a.decodeErr = Conflict, true, Outcome{Reason: a.out.Reason}, nil
		case envelope && a.decodeErr == nil:
			// Any other refusal in such an envelope is a 4xx's too: to a
			// resend after an order that may have been placed, it may
			// refuse the copy for what the order did (Kraken's
			// "EOrder:Insufficient funds" once the filled order spent the
			// balance and freed its cl_ord_id), not fail the order.
			a.envelopeRefusal = true
		}
	}
	return a
}

// otherKeyEchoed reports whether h, an answer's header, carries the key
// header with values none of which is key, bare or as an sf-string
// (KeyQuoted's form), whichever was sent: a server may echo the key in
// the form it parses it to or the one the IETF draft writes.
func (c *Client) otherKeyEchoed(h http.Header, key string) bool {
	vs := h[c.cfg.keyHeader] // both canonical
	if c.cfg.keyHeader == "" || len(vs) == 0 {
		return false
	}
	for _, v := range vs {
		if v = strings.TrimSpace(v); v == key || v == sfString(key) {
			return false
		}
	}
	return true
}

// verdict is the classifier's, with WithKeyConflictStatus's statuses first.
func (c *Client) verdict(status int) Verdict {
	if slices.Contains(c.cfg.conflictStatus, status) {
		return Conflict
	}
	return c.cfg.classify(status)
}

// bodyKeyName is the name by which a server may speak of rec's key: the
// key's header, or the body member that holds it (keyField).
func (c *Client) bodyKeyName(rec *journal.Record) string {
	if c.cfg.keyHeader != "" {
		return c.cfg.keyHeader
	}
	return keyField(rec.Key, rec.Body)
}

// keyName is the name by which a server may speak of rec's key in an
// answer of status: the key's header, or the body member that holds it
// (keyField), looked up only for a refusal whose words are read (a 400,
// a 409, a Conflict: keyConflict, reusedVerdict, refusalInFlight), not
// for every 5xx or 429 of an outage.
func (c *Client) keyName(rec *journal.Record, status int) string {
	if c.cfg.keyHeader != "" || status < 400 {
		return c.cfg.keyHeader
	}
	if status != http.StatusBadRequest && status != http.StatusConflict && c.verdict(status) != Conflict {
		return ""
	}
	return keyField(rec.Key, rec.Body)
}

// reusedVerdict is v, the verdict for status, but Conflict for a
// Processing 409 whose body says the key was used by a request that
// differs (reusedElsewhere): the 422 of servers that answer it with 409;
// and Rejected for one that refuses the version the request carries
// (versionConflict), which no resend of the same bytes gets past, the
// object's state (objectStateRefusal) or the request's values
// (badValueRefusal). name is the key's, as for namesKey.
func reusedVerdict(v Verdict, status int, body []byte, name string) Verdict {
	if v != Processing || status != http.StatusConflict {
		return v
	}
	switch {
	case reusedElsewhere(body, name):
		return Conflict
	case versionConflict(body):
		return Rejected
	case (objectStateRefusal(body) || badValueRefusal(body)) && !saysSubjectRunning(body) && !saysKeyRunning(body, name):
		// Words saying a transfer still runs may be about our own copy
		// (a mesh's retry of this request): such a 409 stays in flight,
		// as reusedElsewhere's words do.
		return Rejected
	}
	return v
}

// keyConflict reports whether a refusal is about the key: a Conflict
// answer rather than a validation error with the same status, or a 400
// that says the key was used with other parameters; with the key in the
// body, either one that says the order is a duplicate (duplicateWords).
// Other answers' bodies are not scanned. name is the key's, as for
// namesKey; rec is the operation refused (saysDuplicateTo).
func (c *Client) keyConflict(v Verdict, status int, body []byte, name string, rec *journal.Record) bool {
	inBody := "" // the key's member, when the key travels in the body
	if c.cfg.keyHeader == "" {
		inBody = name
	}
	switch {
	case v == Conflict:
		return slices.Contains(c.cfg.conflictStatus, status) || namesKey(body, name) || saysDuplicateTo(rec, body, inBody)
	case v == Rejected && status == http.StatusBadRequest:
		return reusesKey(body, name) || saysDuplicateTo(rec, body, inBody)
	}
	return false
}

// replayed reports whether the server says the answer of this status is
// the stored one for this key: Stripe's Idempotent-Replayed: true, or the
// same marker under the X- and "Idempotency-" names other APIs document
// (fiskaly's X-Idempotency-Replayed), PPRO's Request-Idempotency,
// easypay's Idempotency-Replay, Flutterwave's X-Idempotency-Cache-Hit and
// Chargebee's Chargebee-Idempotency-Replayed, the value bare, quoted or
// the structured-field boolean ?1; an Idempotency-Status of "replayed"
// (Integrated Finance's X-Idempotency-Status); or Worldline's
// X-GCS-Idempotence-Request-Timestamp. A replay missed is worse than one
// seen: another request's stored success would be taken for ours.
func replayed(h http.Header, status int) bool {
	for _, name := range replayMarkers[:] {
		// "?1" is true as an RFC 8941 boolean, as a server that writes
		// its headers as structured fields sends it.
		if markerIs(h, name, "true") || strings.TrimSpace(headerValue(h, name)) == "?1" {
			return true
		}
	}
	if markerIs(h, statusMarkers[0], "replayed") || markerIs(h, statusMarkers[1], "replayed") {
		return true
	}
	// Worldline's platform (GlobalCollect, Ingenico, PAYONE) gives every
	// answer to a key's later requests the first one's time: its stored
	// answer, or a 409 while the first still runs, which is no answer of
	// its; nor is a 429, whatever headers it carries: a stored refusal
	// would settle the operation failed.
	return status != http.StatusConflict && status != http.StatusTooManyRequests &&
		headerValue(h, worldlineReplayed) != ""
}

// The answer header names that replayed, keyIgnored and fromCache read,
// all canonical. markedAnswer must accept each of them.
var (
	replayMarkers = [...]string{"Idempotent-Replayed", "Idempotency-Replayed", "X-Idempotent-Replayed", "X-Idempotency-Replayed", "Request-Idempotency",
		"Idempotency-Replay", "X-Idempotency-Cache-Hit", "Chargebee-Idempotency-Replayed"}
	statusMarkers = [...]string{"Idempotency-Status", "X-Idempotency-Status"}
	cacheMarkers  = [...]string{"X-Cache", "X-Cache-Status", "X-Proxy-Cache", "Cf-Cache-Status"}
)

const worldlineReplayed = "X-Gcs-Idempotence-Request-Timestamp"

// markedAnswer reports whether h holds any name that replayed, keyIgnored
// or fromCache reads: without one, they say nothing. A switch, not a set:
// a map read per header name would cost what it saves.
func markedAnswer(h http.Header) bool {
	for name := range h {
		switch name {
		case "Idempotent-Replayed", "Idempotency-Replayed", "X-Idempotent-Replayed", "X-Idempotency-Replayed", "Request-Idempotency",
			"Idempotency-Replay", "X-Idempotency-Cache-Hit", "Chargebee-Idempotency-Replayed",
			"Idempotency-Status", "X-Idempotency-Status",
			worldlineReplayed,
			"Age", "Cache-Status", "X-Cache", "X-Cache-Status", "X-Proxy-Cache", "Cf-Cache-Status":
			return true
		}
	}
	return false
}

// markerIs reports whether header name (canonical) holds value, bare or
// quoted, in any case.
func markerIs(h http.Header, name, value string) bool {
	return strings.EqualFold(strings.Trim(strings.TrimSpace(headerValue(h, name)), `"`), value)
}

// headerValue is h.Get(name) for a name already in canonical form:
// Get would canonicalize it again on every call.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// query asks the result endpoint; the attempt is journaled with its outcome
// in one commit (a GET changes nothing on the server).
func (d *driver) query() (step, error) {
	c := d.c
	// Terminal is final: a manual resolution made while this call waited
	// must stop it before anything is sent. A read, not a commit: no fsync.
	if cur, err := c.store.Get(d.wctx, d.rec.Scope, d.rec.Key); err == nil && !cur.Open() {
		d.rec = cur
		return step{}, errSettledElsewhere
	}
	d.exchanges++
	number := attemptCount(d.rec) + 1
	start := d.now()
	ex := c.send(d.ctx, d.rec, true, resendFree)
	d.serverUntil = ex.serverUntil

	p := pastOf(d.rec, math.MaxInt)
	if p.orderPaid && d.ignoresKey() {
		// Learnt since the refusal: the endpoint does not read the key,
		// so its answer is about the order, whoever paid it, and its "not
		// found" says nothing of a copy of ours. Neither settles: a
		// payment it names is left for a person (copyClaimedFound).
		p.orderPaid, p.copyClaimed = false, true
	}
	st := step{judgment: judgeQuery(p, c.answerOf(d.rec, ex, true)), retryAfter: ex.retryAfter}
	if p.orderPaid && st.move == moveInconclusive && st.notFound && !st.failed && !c.lagging(d.rec, start) {
		// The key's payment, if a copy of ours made one, would show by
		// now: another request paid the order, if the server still
		// keeps the key (orderPaidNotFoundWithin).
		st.judgment = orderPaidNotFoundWithin(st.judgment, d.rec, p, start, resendWindow(c.keyRetention(d.rec)))
	}
	if st.err != nil {
		ex.err = st.err
	}
	ex.blankSent(&st.out)
	now := d.now()
	err := d.commit(func(r *journal.Record) {
		closeOpenAttempts(r)
		r.Attempts = append(r.Attempts, journal.Attempt{Number: number, Kind: journal.AttemptQuery, Start: start})
		recordOutcome(r, number, ex, false, false)
		switch st.move {
		case moveSettle:
			settleRecord(r, st.out, ex, false, now, nil)
			if st.review != "" {
				setReview(r, st.review)
			}
		case moveProcessing:
			held := r.State == StateProcessing && r.Result != nil && r.Result.ResourceID == st.out.ResourceID
			r.State = StateProcessing
			if st.out.ResourceID != "" && !held {
				// The caller holding "unknown" is owed the resource it
				// was told of (to show it, to Confirm by LookupResource),
				// and a later answer naming another is then caught
				// (heldElsewhere). One that names none keeps it. Held as
				// the key's (Replayed), never as our request's own: the
				// endpoint answers for the key, which another request
				// may have used first without contesting it (a key
				// shared, a client order id free again), and its short
				// running form may describe nothing to tell. Only a
				// resource our own answer named is ours whatever its
				// amount says later (heldOwn): one held already, the
				// query naming it too, keeps how it was named.
				r.Result = &journal.Result{ResourceID: st.out.ResourceID, StatusCode: ex.status, Replayed: true}
			}
		case moveReview:
			setReview(r, st.review)
		}
	})
	return d.endAttempt(st, number, ex, true, err)
}

// endAttempt ends a submit's or a query's attempt after the commit of its
// outcome, whose error is err (a failed commit is lateAnswer's): the
// attempt is observed, its host's retry budget learns how it went, and a
// context ended meanwhile leaves the operation unless the attempt settled
// it. Both end alike so that neither counts in the budget what the other
// does not.
func (d *driver) endAttempt(st step, number int, ex exchange, query bool, err error) (step, error) {
	d.observe(number, query, ex, st.label)
	if err != nil {
		d.lateAnswer(err, st, number, ex, query)
		return st, err
	}
	switch st.move {
	case moveSettle:
		d.c.budgetSuccess(d.rec)
	case moveProcessing:
	default:
		d.c.budget.failure(d.c.hostOf(d.rec))
	}
	if d.ctx.Err() != nil && st.move != moveSettle {
		return st, d.leave(context.Cause(d.ctx))
	}
	return st, nil
}

// recordOutcome fills in attempt number's outcome.
func recordOutcome(r *journal.Record, number int, ex exchange, refused, replayed bool) {
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		a := &r.Attempts[i]
		if a.Number != number {
			continue
		}
		a.Done = true
		// Wrote is what maybeExecuted reads: it must say "may have been
		// written" whenever the request is not surely unsent. A transport
		// that reports no trace events gets no benefit of the doubt here
		// either, or a later 4xx would fail an operation the server
		// performed (pastOf) and a cancellation would leave it "pending,
		// never sent".
		a.Wrote = ex.wrote || !ex.unsent
		a.Refused, a.Replayed = refused, replayed
		// Two copies of a submit may have executed: Confirm reads it
		// (journal.ApplyConfirmation) when the server ignores the key.
		a.Resent = ex.resent && a.Kind == journal.AttemptSubmit
		a.Status = ex.status
		a.RetryAfter = ex.retryAfter
		a.Duration = ex.dur
		if ex.err != nil {
			a.Err = truncate(ex.err.Error(), 512)
		}
		return
	}
}

// settleRecord settles r on out and ex. room, unless nil, is where its
// Result goes (submitEnd.result), which r then points at.
func settleRecord(r *journal.Record, out Outcome, ex exchange, replayed bool, now time.Time, room *journal.Result) {
	// ex.body is this exchange's own and nothing changes it: the record
	// may share it (the Store copies what it keeps), unless only a part
	// is kept, which must not pin the whole.
	body := ex.body
	if len(body) > storedBodyBytes {
		body = bytes.Clone(body[:storedBodyBytes])
	}
	r.State = out.State
	if room == nil {
		room = new(journal.Result)
	}
	*room = journal.Result{ResourceID: out.ResourceID, StatusCode: ex.status, Body: body, Reason: out.Reason, Replayed: replayed}
	r.Result = room
	review := ""
	if r.Review == ReviewKeyIgnored && journal.SentTwice(r) {
		// The server took each send for a new request: the answer (a
		// result query's, which tells of the last) is about one of them,
		// and another may have charged. As a confirmation's would.
		review = ReviewMaybeTwice
	}
	setReview(r, review)
	r.Settled = now
	r.NextDue = time.Time{}
}

// truncate cuts s to n bytes at a rune's boundary: a cut through a
// character left invalid UTF-8 in the journal, shown as U+FFFD.
func truncate(s string, n int) string {
	return recordable.Clip(s, n)
}

// observe logs an attempt and calls the attempt hook.
func (d *driver) observe(number int, query bool, ex exchange, outcome string) {
	c := d.c
	kind := "submit"
	if query {
		kind = "query"
	}
	if c.log.Enabled(d.ctx, slog.LevelDebug) {
		attrs := append(opAttrs(d.rec),
			slog.Int("attempt", number), slog.String("kind", kind), slog.Int("status", ex.status),
			slog.String("outcome", outcome), slog.Bool("wrote", ex.wrote), slog.Duration("elapsed", ex.dur))
		if ex.retryAfter > 0 {
			attrs = append(attrs, slog.Duration("retry_after", ex.retryAfter))
		}
		if ex.err != nil {
			attrs = append(attrs, slog.String("err", clippedErr(ex.err).Error()))
		}
		c.log.LogAttrs(d.ctx, slog.LevelDebug, "idem: attempt", attrs...)
	}
	if c.cfg.hooks.Attempt != nil {
		c.cfg.hooks.Attempt(d.hctx, AttemptEvent{
			Scope: d.rec.Scope, Key: d.rec.Key, Number: number, Query: query, Wrote: ex.wrote,
			StatusCode: ex.status, Err: clippedErr(ex.err), RetryAfter: ex.retryAfter, Start: d.attemptStart(number, ex), Duration: ex.dur,
		})
	}
}

// maxShownErr bounds an attempt's error text as the log and the attempt
// hook get it: net/http quotes a malformed status line whole (up to 10
// MiB), a server's line, each attempt.
const maxShownErr = 1024

// clippedErr is err with its text cut to maxShownErr bytes, at a rune's
// boundary; errors.Is and errors.As see err as before.
func clippedErr(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if len(text) <= maxShownErr {
		return err
	}
	return &shownTransportError{msg: recordable.Clip(text, maxShownErr-len(" [cut]")) + " [cut]", err: err}
}
