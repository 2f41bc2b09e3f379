package journal

import (
	"encoding/binary"
	"net/http"
	"slices"
	"time"
)

// The record encoding is hand-written rather than JSON because encoding
// runs inside the single committer goroutine for every write: at 64
// concurrent writers the CPU, not the disk, is the ceiling.
//
// Layout: magic (2 bytes), format version (1 byte), then the fields in the
// order of encode below. Strings and byte slices are a uvarint length and
// the bytes; integers and durations are varints; times are a varint of
// seconds since year 1 (so the zero time is one byte) and a uvarint of
// nanoseconds. The state and review reason come first so that scans which
// need only them (Stats, Prune) stop decoding early.
const (
	magic0 = 0xE1
	magic1 = 0xDE

	// formatVersion is the file format this build writes (the meta
	// bucket's version); it migrates older ones (see migrateV1 and
	// migrateV2). Version 3 has a log beside the file (log.go).
	formatVersion = 3
	// recordVersion is the record encoding this build writes; it reads
	// every version up to it. Version 2 added the replayed and refused
	// attempt flags and the replayed result flag: a build that knows only
	// version 1 must refuse such a record (ErrVersion) rather than drop
	// the flags, which decide whether an operation may be resent.
	// Version 3 appended the confirmations (confirm.go) and then the
	// caller's trace context (Record.Trace) after NextDue; older records
	// decode with neither. Version 4 lets a confirmation be in state
	// processing (the server's answer contradicting a failure): only a
	// record that holds one is written as version 4, so that a build that
	// knows only version 3 refuses it as newer (ErrVersion), not as
	// damaged, and still reads every other. Version 5 adds a
	// confirmation's KeyInUse, likewise only in a record that holds one;
	// version 6 an attempt's Resent flag, likewise; version 7 the key's
	// placement (Record.KeyPlacement), after Trace, likewise: only a
	// record that holds one, which every record a Client creates since
	// does.
	recordVersion = 7

	// secondsToYear1 shifts Unix seconds so that the zero time.Time is 0.
	secondsToYear1 = 62135596800
)

// State codes on disk. 0 is the empty state, which only Resolution.From may
// hold; codes beyond stateUnknown are corrupt.
var stateCodes = [...]State{"", StatePending, StateProcessing, StateSucceeded, StateFailed, StateUnknown}

func stateCode(s State) byte {
	switch s {
	case "":
		return 0
	case StatePending:
		return 1
	case StateProcessing:
		return 2
	case StateSucceeded:
		return 3
	case StateFailed:
		return 4
	case StateUnknown:
		return 5
	}
	return 0xFF // rejected by validate before it reaches encode; corrupt on decode
}

// Attempt kind codes on disk; kindOther is followed by the kind as a string.
const (
	kindEmpty = iota
	kindSubmit
	kindQuery
	kindOther
)

// Attempt flag bits.
const (
	flagWrote = 1 << iota
	flagDone
	flagReplayed // version 2
	flagRefused  // version 2
	flagResent   // version 6
	flagMaskV1   = flagWrote | flagDone
	flagMaskV2   = flagMaskV1 | flagReplayed | flagRefused
	flagMask     = flagMaskV2 | flagResent
)

// Result presence codes: a replayed result needs version 2.
const (
	resultAbsent   = 0
	resultPresent  = 1
	resultReplayed = 2
)

// encode appends the encoding of r to dst. It never fails: validate has
// already rejected what the format cannot hold.
func encode(dst []byte, r *Record) []byte {
	dst, _, _ = encodeHeader(dst, r)
	return dst
}

// encodeHeader is encode that also returns the request header's encoding
// (appendHeader), a slice of the record's: what encodedHeader would find
// in it, without reading the record again; and the body's bytes in it.
// Both slices are capped.
func encodeHeader(dst []byte, r *Record) (enc, header, body []byte) {
	return encodeHeaderAs(dst, r, nil)
}

// encodeHeaderAs is encodeHeader given, unless it is nil, r.Header's
// encoding (appendHeader's bytes, which it writes as they are): an owned
// Update's record keeps the header the stored bytes hold (updateOp.run),
// whose map a settle would otherwise walk, sort and write out again.
func encodeHeaderAs(dst []byte, r *Record, known []byte) (enc, header, body []byte) {
	size := 3 + 1 + len(r.Review) + len(r.Scope) + len(r.Key) + len(r.Ref) + len(r.Method) +
		len(r.URL) + len(r.QueryURL) + len(r.Body) + 32 + 16*6 + 48*len(r.Attempts) + 1 + 64*len(r.Confirmations) + len(r.Trace) + 1 + len(r.KeyPlacement) + 1
	// The names are gathered for appendHeader as they are counted: one
	// pass over the map, not two. On the stack for the few headers a
	// request has: this runs on every write.
	var small [8]string
	names := small[:0]
	if known != nil {
		size += len(known)
	} else {
		for k, vs := range r.Header {
			names = append(names, k)
			size += len(k) + 2
			for _, v := range vs {
				size += len(v) + 2
			}
		}
	}
	if r.Result != nil {
		size += len(r.Result.ResourceID) + len(r.Result.Body) + len(r.Result.Reason) + 16
	}
	dst = slices.Grow(dst, size)

	dst = append(dst, magic0, magic1, versionOf(r), stateCode(r.State))
	dst = appendString(dst, r.Review)
	dst = appendString(dst, r.Scope)
	dst = appendString(dst, r.Key)
	dst = appendString(dst, r.Ref)
	dst = appendString(dst, r.Method)
	dst = appendString(dst, r.URL)
	dst = appendString(dst, r.QueryURL)
	hs := len(dst)
	if known != nil {
		dst = append(dst, known...)
	} else {
		dst = appendHeaderNames(dst, r.Header, names)
	}
	he := len(dst)
	dst = appendBytes(dst, r.Body)
	be := len(dst)
	dst = append(dst, r.BodySHA[:]...)

	dst = binary.AppendUvarint(dst, uint64(len(r.Attempts)))
	for i := range r.Attempts {
		a := &r.Attempts[i]
		dst = binary.AppendVarint(dst, int64(a.Number))
		switch a.Kind {
		case "":
			dst = append(dst, kindEmpty)
		case AttemptSubmit:
			dst = append(dst, kindSubmit)
		case AttemptQuery:
			dst = append(dst, kindQuery)
		default:
			dst = append(dst, kindOther)
			dst = appendString(dst, string(a.Kind))
		}
		dst = appendTime(dst, a.Start)
		var flags byte
		if a.Wrote {
			flags |= flagWrote
		}
		if a.Done {
			flags |= flagDone
		}
		if a.Replayed {
			flags |= flagReplayed
		}
		if a.Refused {
			flags |= flagRefused
		}
		if a.Resent {
			flags |= flagResent
		}
		dst = append(dst, flags)
		dst = binary.AppendVarint(dst, int64(a.Status))
		dst = appendString(dst, a.Err)
		dst = binary.AppendVarint(dst, int64(a.RetryAfter))
		dst = binary.AppendVarint(dst, int64(a.Duration))
	}

	if res := r.Result; res == nil {
		dst = append(dst, resultAbsent)
	} else {
		if res.Replayed {
			dst = append(dst, resultReplayed)
		} else {
			dst = append(dst, resultPresent)
		}
		dst = appendString(dst, res.ResourceID)
		dst = binary.AppendVarint(dst, int64(res.StatusCode))
		dst = appendBytes(dst, res.Body)
		dst = appendString(dst, res.Reason)
	}
	if m := r.Resolved; m == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = appendString(dst, m.By)
		dst = appendString(dst, m.Reason)
		dst = appendTime(dst, m.At)
		dst = append(dst, stateCode(m.From))
	}

	dst = appendTime(dst, r.Created)
	dst = appendTime(dst, r.FirstSent)
	dst = appendTime(dst, r.Updated)
	dst = appendTime(dst, r.Settled)
	dst = appendTime(dst, r.NextDue)
	dst = appendConfirmations(dst, r.Confirmations) // version 3
	dst = appendString(dst, r.Trace)                // version 3
	if r.KeyPlacement != "" {
		dst = appendString(dst, r.KeyPlacement) // version 7 (versionOf)
	}
	return dst, dst[hs:he:he], dst[be-len(r.Body) : be : be]
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix()+secondsToYear1)
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// appendHeader writes keys in sorted order so that equal records encode to
// equal bytes.
func appendHeader(dst []byte, h http.Header) []byte {
	var small [8]string
	keys := small[:0]
	for k := range h {
		keys = append(keys, k)
	}
	return appendHeaderNames(dst, h, keys)
}

// appendHeaderNames is appendHeader given the names of h, in any order;
// it sorts them in place.
func appendHeaderNames(dst []byte, h http.Header, keys []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(h)))
	if len(h) == 0 {
		return dst
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendString(dst, k)
		vs := h[k]
		dst = binary.AppendUvarint(dst, uint64(len(vs)))
		for _, v := range vs {
			dst = appendString(dst, v)
		}
	}
	return dst
}

// decode decodes a record. It copies everything it keeps, so b may be
// bbolt memory that is only valid inside a transaction. It never panics,
// and it allocates no more than a small multiple of len(b): every count
// and length is checked against the bytes that remain.
func decode(b []byte) (*Record, error) {
	r, _, _, err := decodeStored(b)
	return r, err
}

// decodeStored is decode that also returns the stored body and the request
// header's encoding (encodedHeader's): slices of b, not copies.
func decodeStored(b []byte) (r *Record, body, header []byte, err error) {
	return decodeStoredIn(new(recordBlock), b, false, nil)
}

// decodeStoredIn is decodeStored into blk, which it overwrites whole: the
// record handed back is blk's. An owned Update decodes into a block of
// its op's allocation (ownedUpdateOp), one allocation fewer per write.
// With shared, r.Body is the body's slice of b too, not a copy: only for
// a caller that neither changes it nor keeps it past b's life (an owned
// Update's, which puts its own encoding's in its place). A like that is
// not nil gives r its request strings and header where b holds the same
// (requestLike).
func decodeStoredIn(blk *recordBlock, b []byte, shared bool, like *Record) (r *Record, body, header []byte, err error) {
	d := decoder{b: b}
	d.header()
	*blk = recordBlock{r: Record{State: d.state()}}
	r = &blk.r
	if d.err == nil && !r.State.Valid() {
		d.fail("invalid state")
	}
	if header = d.requestLike(r, like); header == nil {
		d.textAhead()
		r.Review = d.string()
		r.Scope = d.string()
		r.Key = d.string()
		r.Ref = d.string()
		r.Method = d.string()
		r.URL = d.string()
		r.QueryURL = d.string()
		hs := len(b) - len(d.b)
		r.Header = d.httpHeader(blk.values[:])
		header = b[hs : len(b)-len(d.b)]
	}
	body = d.take(d.length())
	if shared && len(body) > 0 {
		r.Body = body[:len(body):len(body)]
	} else {
		r.Body = cloneBytes(body)
	}
	copy(r.BodySHA[:], d.take(32))

	// An encoded attempt is at least 9 bytes.
	if n := d.count(9); n > 0 {
		if n <= len(blk.attempts) {
			r.Attempts = blk.attempts[:n:n]
		} else {
			r.Attempts = make([]Attempt, n)
		}
		for i := range r.Attempts {
			a := &r.Attempts[i]
			a.Number = d.int()
			switch k := d.byte(); k {
			case kindEmpty:
			case kindSubmit:
				a.Kind = AttemptSubmit
			case kindQuery:
				a.Kind = AttemptQuery
			case kindOther:
				a.Kind = AttemptKind(d.string())
			default:
				d.fail("invalid attempt kind")
			}
			a.Start = d.time()
			flags := d.byte()
			if flags&^d.flagMask() != 0 {
				d.fail("invalid attempt flags")
			}
			a.Wrote = flags&flagWrote != 0
			a.Done = flags&flagDone != 0
			a.Replayed = flags&flagReplayed != 0
			a.Refused = flags&flagRefused != 0
			a.Resent = flags&flagResent != 0
			a.Status = d.int()
			a.Err = d.string()
			a.RetryAfter = time.Duration(d.varint())
			a.Duration = time.Duration(d.varint())
		}
	}

	switch p := d.byte(); {
	case p == resultAbsent:
	case p == resultPresent, p == resultReplayed && d.version >= 2:
		r.Result = &Result{
			ResourceID: d.string(),
			StatusCode: d.int(),
			Body:       d.bytes(),
			Reason:     d.string(),
			Replayed:   p == resultReplayed,
		}
	default:
		d.fail("invalid presence byte")
	}
	if d.present() {
		r.Resolved = &Resolution{
			By:     d.string(),
			Reason: d.string(),
			At:     d.time(),
			From:   d.state(),
		}
	}

	r.Created = d.time()
	r.FirstSent = d.time()
	r.Updated = d.time()
	r.Settled = d.time()
	r.NextDue = d.time()
	r.Confirmations = d.confirmations() // version 3
	if d.version >= 3 {
		r.Trace = d.string()
	}
	if d.version >= 7 {
		r.KeyPlacement = d.placement(like)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, nil, nil, d.err
	}
	return r, body, header, nil
}

// recordBlock is a decoded record with room for its first attempt and its
// header's first value: a record of one attempt whose header has one value
// (an Update's, after the create journaled the first send) costs one
// allocation where it cost three, and fits Go's 576-byte size class where
// the three took 592 bytes. The slices given out of it are capped at their
// length, so a caller's append never writes into a neighbour; the block is
// the decoded record's alone, which the journal never touches again.
type recordBlock struct {
	r        Record
	attempts [1]Attempt
	values   [1]string
}

// encodedHeader returns the request header's bytes in the encoding b
// (a slice of b), nil if b is damaged.
func encodedHeader(b []byte) []byte {
	d := decoder{b: b}
	d.header()
	d.state()
	d.skipRequestStrings()
	start := len(b) - len(d.b)
	d.skipHeader()
	if d.err != nil {
		return nil
	}
	return b[start : len(b)-len(d.b)]
}

// decodeState decodes only a record's state and review reason.
func decodeState(b []byte) (State, string, error) {
	d := decoder{b: b}
	d.header()
	s := d.state()
	if d.err == nil && !s.Valid() {
		d.fail("invalid state")
	}
	review := d.string()
	return s, review, d.err
}

// decoder reads fields with a sticky error: after the first failure every
// read returns a zero value, so decode reads straight through and checks
// once.
type decoder struct {
	b       []byte
	err     error
	version byte // the record's encoding version, once header has read it
	// text is a copy of the bytes that held len(b) == textEnd bytes
	// before them: string takes the strings that lie in it as substrings
	// of it (see textAhead).
	text    string
	textEnd int
}

// textAhead copies, as one string, the bytes from here to the end of the
// request's header (the review reason, the request's strings and its
// header), so that the dozen strings in them cost one allocation, not
// one each. They are immutable, so sharing one backing is safe; a caller
// that keeps one of them keeps the rest (a few hundred bytes) alive.
func (d *decoder) textAhead() {
	ahead := decoder{b: d.b}
	ahead.skipRequestStrings()
	ahead.skipHeader()
	if d.err != nil || ahead.err != nil {
		return // read as before: the reads themselves report the damage
	}
	d.text = string(d.b[:len(d.b)-len(ahead.b)])
	d.textEnd = len(d.b)
}

// skipRequestStrings passes over the strings between a record's state and
// its request header: Review, Scope, Key, Ref, Method, URL, QueryURL.
func (d *decoder) skipRequestStrings() {
	for range 7 {
		d.take(d.length())
	}
}

// skipHeader passes over an encoded request header (appendHeader).
func (d *decoder) skipHeader() {
	for range d.count(2) {
		d.take(d.length())
		for range d.count(1) {
			d.take(d.length())
		}
	}
}

// flagMask is the attempt flags the record's version may hold.
func (d *decoder) flagMask() byte {
	switch {
	case d.version < 2:
		return flagMaskV1
	case d.version < 6:
		return flagMaskV2
	}
	return flagMask
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errorf("record: %s: %w", what, ErrCorrupt)
	}
	d.b = nil
}

func (d *decoder) header() {
	if len(d.b) < 3 || d.b[0] != magic0 || d.b[1] != magic1 {
		d.fail("bad magic")
		return
	}
	switch v := d.b[2]; {
	case v == 0:
		d.fail("bad format version")
		return
	case v > recordVersion:
		d.err = errorf("record format version %d, this build reads up to %d: %w", v, recordVersion, ErrVersion)
		d.b = nil
		return
	}
	d.version = d.b[2]
	d.b = d.b[3:]
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte() byte {
	p := d.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) present() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("invalid presence byte")
	return false
}

func (d *decoder) state() State {
	c := d.byte()
	if int(c) >= len(stateCodes) {
		d.fail("invalid state")
		return ""
	}
	return stateCodes[c]
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	// One byte, as most are (lengths, counts), read here: binary.Uvarint's
	// loop for it was most of what a decode spent on varints.
	if len(d.b) > 0 && d.b[0] < 0x80 {
		v := d.b[0]
		d.b = d.b[1:]
		return uint64(v)
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint is binary.Varint's zig-zag decoding of a uvarint, which reads
// the common one-byte case itself.
func (d *decoder) varint() int64 {
	ux := d.uvarint()
	if ux&1 != 0 {
		return ^int64(ux >> 1)
	}
	return int64(ux >> 1)
}

// int decodes a varint into an int; on 32-bit platforms a value that does
// not fit is corrupt rather than silently truncated.
func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("integer out of range")
		return 0
	}
	return int(v)
}

// length reads a length prefix and checks it against the remaining bytes,
// so a forged length cannot make decode allocate more than the input.
func (d *decoder) length() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("length exceeds record")
		return 0
	}
	return int(n)
}

// count reads an element count; each element takes at least min bytes.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minSize) {
		d.fail("count exceeds record")
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.length()
	if off := d.textEnd - len(d.b); d.err == nil && n > 0 && off >= 0 && off+n <= len(d.text) {
		d.b = d.b[n:]
		return d.text[off : off+n]
	}
	return string(d.take(n))
}

// commonPlacements are the key placements most Clients journal (idem's
// placementOf): its default header, bare or quoted, and the body.
var commonPlacements = [...]string{"header Idempotency-Key", "body", "header Idempotency-Key quoted"}

// placement reads Record.KeyPlacement without a string of its own where
// it can: like's (an Update's own record) or a common one where the bytes
// hold the same. Every version 7 record carries one, and each Get and
// every record of a scan paid an allocation for it.
func (d *decoder) placement(like *Record) string {
	b := d.take(d.length())
	if like != nil && string(b) == like.KeyPlacement {
		return like.KeyPlacement
	}
	for _, p := range commonPlacements {
		if string(b) == p {
			return p
		}
	}
	return string(b)
}

func (d *decoder) bytes() []byte {
	n := d.length()
	if n == 0 {
		return nil
	}
	return slices.Clone(d.take(n))
}

func (d *decoder) time() time.Time {
	s := d.varint()
	ns := d.uvarint()
	if ns >= uint64(time.Second) {
		d.fail("invalid nanoseconds")
		return time.Time{}
	}
	if d.err != nil {
		return time.Time{}
	}
	return time.Unix(s-secondsToYear1, int64(ns)).UTC()
}

// httpHeader decodes a request header. A key's values are carved from
// room while they fit (each capped at its length), else allocated.
func (d *decoder) httpHeader(room []string) http.Header {
	// An encoded header entry is at least 2 bytes: key length, value count.
	n := d.count(2)
	if n == 0 {
		return nil
	}
	h := make(http.Header, min(n, 16)) // n is only bounded by the record's size
	for range n {
		k := d.string()
		var vs []string
		if c := d.count(1); c <= len(room) {
			vs, room = room[:c:c], room[c:]
		} else {
			vs = make([]string, c)
		}
		for i := range vs {
			vs[i] = d.string()
		}
		if _, dup := h[k]; dup {
			d.fail("duplicate header key")
		}
		h[k] = vs
	}
	if d.err != nil {
		return nil
	}
	return h
}
