package idem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/idemkit/idem/internal/httpsyntax"
)

// RequestFromHTTP turns an outgoing *http.Request into a Request to
// journal: its method, absolute URL, headers and body (read once, here,
// and closed). An Idempotency-Key header becomes the Request's Key (idem
// sends the key itself, in the header WithKeyHeader names); Content-Length
// is dropped, since the journaled body sets it. A body whose length is not
// a positive ContentLength, a Host other than the URL's and trailers are
// refused with ErrInvalidRequest: none could be journaled as it would have
// been sent. A credential header
// (Authorization, Cookie, …) is refused with ErrSecretHeader, as Prepare
// refuses it: add credentials at send time with WithRequestHook. A body
// over MaxBodyBytes is refused with ErrInvalidRequest. The Request's
// Scope, Ref and ResultURL are left for the caller to set.
func RequestFromHTTP(r *http.Request) (Request, error) {
	if r == nil || r.URL == nil {
		return Request{}, fmt.Errorf("%w: RequestFromHTTP: nil request or URL", ErrInvalidRequest)
	}
	for name := range r.Header {
		if httpsyntax.CredentialHeader(name) {
			return Request{}, fmt.Errorf("%w: %s would be written to disk; add credentials at send time with idem.WithRequestHook or your http.Client's Transport", ErrSecretHeader, http.CanonicalHeaderKey(name))
		}
	}
	// A Request has no Host or trailers: journaled without them, it would
	// go to the URL's virtual host, with a body other than the caller's.
	if r.Host != "" && r.Host != r.URL.Host && r.Host != strings.TrimSuffix(r.URL.Host, ":") {
		return Request{}, fmt.Errorf("%w: RequestFromHTTP: Host %q differs from the URL's host; put the host in the URL (a Request sends the URL's)", ErrInvalidRequest, r.Host)
	}
	if len(r.Trailer) > 0 {
		return Request{}, fmt.Errorf("%w: RequestFromHTTP: Trailer set; trailers are not journaled: put what they carry in a header or the body", ErrInvalidRequest)
	}
	// net/http sends an empty Method as GET; Prepare would make it POST.
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req := Request{Method: method, URL: r.URL.String(), Header: r.Header.Clone()}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if keys := req.Header.Values(DefaultKeyHeader); len(keys) > 0 {
		if len(keys) > 1 {
			return Request{}, fmt.Errorf("%w: RequestFromHTTP: %d %s headers; one operation has one key", ErrInvalidRequest, len(keys), DefaultKeyHeader)
		}
		if strings.TrimSpace(keys[0]) == "" {
			// An empty Key means "make one up": the same http.Request
			// submitted twice would become two operations.
			return Request{}, fmt.Errorf("%w: RequestFromHTTP: empty %s header; set a key or remove the header", ErrInvalidRequest, DefaultKeyHeader)
		}
		req.Key = keys[0]
		req.Header.Del(DefaultKeyHeader)
	}
	req.Header.Del("Content-Length")
	if len(req.Header) == 0 {
		req.Header = nil
	}
	if r.Body != nil && r.Body != http.NoBody {
		defer r.Body.Close()
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			return Request{}, fmt.Errorf("idem: RequestFromHTTP: read body: %w", err)
		}
		if len(body) > MaxBodyBytes {
			return Request{}, fmt.Errorf("%w: RequestFromHTTP: body over %d bytes (MaxBodyBytes)", ErrInvalidRequest, MaxBodyBytes)
		}
		// net/http refuses to send a body of another length than a
		// positive ContentLength says (0 means unknown): a short one is
		// most likely cut, and would be journaled and sent cut for ever.
		if r.ContentLength > 0 && int64(len(body)) != r.ContentLength {
			return Request{}, fmt.Errorf("%w: RequestFromHTTP: body is %d bytes, ContentLength says %d; set ContentLength to the body's length (or -1 for unknown)", ErrInvalidRequest, len(body), r.ContentLength)
		}
		req.Body = body
	}
	return req, nil
}

// errNoBody is DecodeBody's answer for a Result without a body.
var errNoBody = errors.New("idem: DecodeBody: the result has no body (nil Result, or settled by hand or by a query without one)")

// DecodeBody decodes a Result's body, the server's answer that settled the
// operation, as JSON into a T: the created resource, say. The journal keeps
// at most 64 KiB of a body, so a larger one fails to decode. A succeeded
// Result with a StatusCode of 400 or more was settled by an answer that
// names the resource rather than carries it (GoCardless's and Primer's
// 409 naming the resource the key created), or by a 409 carrying the
// first request's answer as it was (Interchecks, DOKU): only the second
// is the resource, so read StatusCode first, and fetch the first kind by
// Result.ResourceID.
func DecodeBody[T any](res *Result) (T, error) {
	var v T
	if res == nil || len(res.Body) == 0 {
		return v, errNoBody
	}
	if err := json.Unmarshal(res.Body, &v); err != nil {
		return v, fmt.Errorf("idem: DecodeBody: %w", err)
	}
	return v, nil
}
