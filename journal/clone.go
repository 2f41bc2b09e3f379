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
	c.owned = ownership{}
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
	storedTimes(&c)
	return &c
}

// adopt is clone for a record the client marked as its own (see
// ownership): it returns r itself, unmarked and in stored form (asStored),
// rather than a copy. The client built r for this one Create and hands it
// to nobody else to change: what it reads of r afterwards (the request's
// strings, body and header, to compare a joiner's request) nothing
// changes, and the Store keeps nothing of r once create returns but its
// encoding. A copy was an allocation of the record and its first attempt
// (576 bytes) on every operation the Client journals.
//
// A header that asStored would replace (empty, or a nil value list) is
// the one exception: a joiner of the client's call may be reading r's
// Header as create runs, so such a record is copied, as adoptCopy did
// for every record.
func adopt(r *Record) *Record {
	r.owned = ownership{}
	if !headerStored(r.Header) {
		return adoptCopy(r)
	}
	return asStored(r)
}

// headerStored reports whether asStored keeps h as it is: decode's form,
// neither empty nor with a nil value list.
func headerStored(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	for _, vs := range h {
		if vs == nil {
			return false
		}
	}
	return true
}

// adoptCopy is adopt's copy of r: it shares r's body and header, which
// nobody changes, instead of copying them.
//
// The copy and its attempts are one allocation when the record has at
// most one attempt (a create's usual: none, or the first send journaled
// before it goes), as decode's are (recordBlock): the attempts' slice is
// capped at its length, so the caller's append never writes past it.
func adoptCopy(r *Record) *Record {
	blk := &recordBlock{r: *r}
	c := &blk.r
	c.owned = ownership{}
	// asStored changes Start in place only in a copy; the driver's own
	// list stays its own.
	if n := len(r.Attempts); n <= len(blk.attempts) && r.Attempts != nil {
		c.Attempts = blk.attempts[:n:n]
		copy(c.Attempts, r.Attempts)
	} else {
		c.Attempts = slices.Clone(r.Attempts)
	}
	return asStored(c)
}

// storedTimes puts r's times in decode's form (UTC, without a monotonic
// reading), those of its resolution and confirmations in copies of them.
func storedTimes(r *Record) {
	if r.Resolved != nil {
		m := *r.Resolved
		m.At = m.At.UTC()
		r.Resolved = &m
	}
	r.Confirmations = cloneConfirmations(r.Confirmations)
	r.Created = r.Created.UTC()
	r.FirstSent = r.FirstSent.UTC()
	r.Updated = r.Updated.UTC()
	r.Settled = r.Settled.UTC()
	r.NextDue = r.NextDue.UTC()
}

// asStored puts r, in place, in the form a later Get returns it (that of
// decode(encode(r)): times in UTC without a monotonic reading, empty
// slices and maps nil) and returns it. It is clone without the copies,
// for a record that is the caller's already: the one Update's fn was
// given, which the Store keeps nothing of but its encoding. Copying it
// again, body and all, was a third copy of the body per Update.
//
// What r holds that fn may have put there from elsewhere is copied, not
// changed, where its form must change: a header with a nil value list,
// an empty result body, confirmations, a resolution. r must satisfy
// validate.
func asStored(r *Record) *Record {
	if len(r.Header) == 0 {
		r.Header = nil
	} else {
		for _, vs := range r.Header {
			if vs == nil { // decode gives an empty list
				r.Header = cloneHeader(r.Header)
				break
			}
		}
	}
	if len(r.Body) == 0 {
		r.Body = nil
	}
	if len(r.Attempts) == 0 {
		r.Attempts = nil
	}
	for i := range r.Attempts {
		if s := r.Attempts[i].Start; s != s.UTC() { // a local time, or a monotonic reading
			r.Attempts = slices.Clone(r.Attempts)
			for i := range r.Attempts {
				r.Attempts[i].Start = r.Attempts[i].Start.UTC()
			}
			break
		}
	}
	if r.Result != nil && r.Result.Body != nil && len(r.Result.Body) == 0 {
		res := *r.Result
		res.Body = nil
		r.Result = &res
	}
	storedTimes(r)
	return r
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
