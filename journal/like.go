package journal

import (
	"bytes"
	"net/http"
	"reflect"
)

// requestLike reads the request's strings and header (Review through the
// header, in decode's order) as like's own when the bytes ahead hold
// exactly what like's encoding would: r takes like's strings and header
// map, with nothing copied or allocated, and requestLike returns the
// header's encoding (a slice of d's bytes). Otherwise, or when like is
// nil, it reads nothing and returns nil, and the caller decodes them.
//
// The client's settle of every operation decodes the record it created a
// moment ago, whose strings and header it still holds (internal/owned.Like):
// the string of the request's text and the header map were three
// allocations of each write. Sharing is safe: strings are immutable, and
// the header map is one the client never changes, as the journal's rules
// forbid an Update to (validateChange).
func (d *decoder) requestLike(r, like *Record) []byte {
	if like == nil || d.err != nil {
		return nil
	}
	a := decoder{b: d.b, version: d.version}
	for _, s := range [...]string{like.Review, like.Scope, like.Key, like.Ref, like.Method, like.URL, like.QueryURL} {
		if string(a.take(a.length())) != s {
			return nil
		}
	}
	start := a.b
	if a.err != nil || !a.headerIs(like.Header) {
		return nil
	}
	r.Review, r.Scope, r.Key, r.Ref = like.Review, like.Scope, like.Key, like.Ref
	r.Method, r.URL, r.QueryURL = like.Method, like.URL, like.QueryURL
	if len(like.Header) > 0 {
		r.Header = like.Header // else nil, as httpHeader's of no entries
	}
	d.b = a.b
	return start[:len(start)-len(a.b)]
}

// headerIs reads an encoded request header and reports whether it holds
// exactly h: the same names, in the strictly increasing order the
// encoding writes them (a duplicate, which httpHeader refuses, is not
// h), each with the same values in the same order.
func (d *decoder) headerIs(h http.Header) bool {
	n := d.count(2)
	if n != len(h) {
		return false
	}
	var last []byte
	for i := range n {
		k := d.take(d.length())
		if d.err != nil || i > 0 && bytes.Compare(last, k) >= 0 {
			return false
		}
		last = k
		vs, ok := h[string(k)]
		if !ok || d.count(1) != len(vs) {
			return false
		}
		for _, v := range vs {
			if string(d.take(d.length())) != v {
				return false
			}
		}
	}
	return d.err == nil
}

// sameHeaderMap reports whether a and b are one map, not two that hold
// the same: what a map's contents were when compared says nothing of a
// second map's since.
func sameHeaderMap(a, b http.Header) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// headerHolds reports whether enc, a request header's encoding, is
// exactly h's: what appendHeader would write of h now, however h was
// changed since enc was compared with it.
func headerHolds(enc []byte, h http.Header) bool {
	d := decoder{b: enc}
	return d.headerIs(h) && len(d.b) == 0
}
