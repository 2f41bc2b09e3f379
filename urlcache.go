package idem

import (
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
