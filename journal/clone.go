package journal

import (
	"net/http"
	"slices"
)

// clone returns a deep copy of r that equals decode(encode(r)): what a
// later Get returns. It is what the Store hands back after a write, in
// place of decoding the bytes it has just encoded. Strings are shared
// (they are immutable); every slice, map and pointer is copied; empty
// slices and maps become nil and times become UTC without a monotonic
// reading, as decode makes them.
//
// r must satisfy validate: clone, like encode, does not check.
func clone(r *Record) *Record {
	c := *r
	c.Header = cloneHeader(r.Header)
	c.Body = cloneBytes(r.Body)
	c.Attempts = nil
	if len(r.Attempts) > 0 {
		c.Attempts = slices.Clone(r.Attempts)
		for i := range c.Attempts {
			c.Attempts[i].Start = c.Attempts[i].Start.UTC()
		}
	}
	if r.Result != nil {
		res := *r.Result
		res.Body = cloneBytes(res.Body)
		c.Result = &res
	}
	if r.Resolved != nil {
		m := *r.Resolved
		m.At = m.At.UTC()
		c.Resolved = &m
	}
	c.Confirmations = cloneConfirmations(r.Confirmations)
	c.Created = r.Created.UTC()
	c.FirstSent = r.FirstSent.UTC()
	c.Updated = r.Updated.UTC()
	c.Settled = r.Settled.UTC()
	c.NextDue = r.NextDue.UTC()
	return &c
}

func cloneConfirmations(cs []Confirmation) []Confirmation {
	if len(cs) == 0 {
		return nil
	}
	cs = slices.Clone(cs)
	for i := range cs {
		cs[i].At = cs[i].At.UTC()
	}
	return cs
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

// cloneHeader is not http.Header.Clone: that keeps a nil value slice nil,
// where decode gives an empty one, and returns an empty map, not nil.
func cloneHeader(h http.Header) http.Header {
	if len(h) == 0 {
		return nil
	}
	c := make(http.Header, len(h))
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	all := make([]string, 0, n) // one backing array, as http.Header.Clone does
	for k, vs := range h {
		all = append(all, vs...)
		c[k] = all[len(all)-len(vs) : len(all) : len(all)]
	}
	return c
}
