package idem

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// urlCache holds the submit URL a Client parsed last. Most operations of
// a client go to a few URLs, one at a time: parsing each request's URL
// again, once to validate and journal it and once more to send it, is
// work done twice. A miss costs what the parse cost before, and one small
// allocation.
type urlCache struct{ last atomic.Pointer[parsedURL] }

// parsedURL is one URL as absoluteURL accepted it. Never changed once
// stored: readers copy u.
type parsedURL struct {
	raw       string  // as the caller wrote it
	journaled string  // u.String()
	u         url.URL // url.Parse(raw)
}

// parse is absoluteURL("URL", raw) with its string form.
func (c *urlCache) parse(raw string) (*parsedURL, error) {
	if p := c.lookup(raw); p != nil {
		return p, nil
	}
	u, err := absoluteURL("URL", raw)
	if err != nil {
		return nil, err
	}
	p := &parsedURL{raw: raw, journaled: u.String(), u: *u}
	c.last.Store(p)
	return p, nil
}

// lookup returns the cached URL written as raw, or nil.
func (c *urlCache) lookup(raw string) *parsedURL {
	if p := c.last.Load(); p != nil && p.raw == raw {
		return p
	}
	return nil
}

// setRequestURL makes r's URL and Host what http.NewRequest makes of
// p.raw: url.Parse(p.raw), its empty port dropped (net/http's
// removeEmptyPort: a host ending in ':' has an empty port).
func (p *parsedURL) setRequestURL(r *http.Request) {
	*r.URL = p.u
	r.URL.Host = strings.TrimSuffix(r.URL.Host, ":")
	r.Host = r.URL.Host
}

// requestRoom is the room a submit's request takes from its attempt's
// trace (attemptTrace.room), which every attempt allocates anyway: the
// request's URL and its body's reader. Each attempt has its own, so
// nothing in it is shared with another attempt's request, and the trace
// lives as long as net/http holds the request (its hooks are the trace's).
type requestRoom struct {
	url  url.URL
	body bytes.Reader
}

// newRequest is http.NewRequestWithContext(ctx, method, p.raw,
// bytes.NewReader(body)) with room's URL and reader, set as setRequestURL
// and bytes.NewReader set them: the caller's room shares an allocation it
// makes anyway (the attempt's trace), where NewRequest would allocate a
// URL of its own by parsing "" (and, of an empty body, a NopCloser and
// GetBody it then drops), and the caller a reader. Every field is what
// NewRequest sets (TestCachedURLRequestIsNewRequests). ok false: a method
// NewRequest must check (validMethod), left to it.
func (p *parsedURL) newRequest(ctx context.Context, method string, body []byte, room *requestRoom) (r *http.Request, ok bool) {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet,
		http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodConnect:
	default:
		return nil, false
	}
	req := http.Request{Method: method, URL: &room.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: make(http.Header)}
	p.setRequestURL(&req)
	if len(body) == 0 {
		// NewRequest's own for a body of no bytes: NoBody, which says
		// "zero" where a ContentLength of 0 says "unknown".
		req.Body = http.NoBody
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	} else {
		br := &room.body
		br.Reset(body) // bytes.NewReader's reader
		req.Body = io.NopCloser(br)
		req.ContentLength = int64(len(body))
		snapshot := *br
		req.GetBody = func() (io.ReadCloser, error) {
			r := snapshot
			return io.NopCloser(&r), nil
		}
	}
	// WithContext's copy is the request's one allocation; req stays on
	// the stack.
	return req.WithContext(ctx), true
}
