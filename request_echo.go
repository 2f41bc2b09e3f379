package idem

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// echoesRequest reports whether answer is request, the body sent, handed
// back: its bytes, or the same JSON value in other bytes, as a front that
// parses the posted JSON (or form) and writes it back gives it: members
// in another order (Go's encoding/json sorts a map's), indented,
// strings escaped otherwise ("&" as \u0026, "/" as \/), numbers written
// as the float64 they were read into (10.00 as 10). Such an answer
// names the key wherever the request does and says nothing the request
// did not: it is no server's word on the order. Only an answer exactly
// the request's value is one: an API's answer about the order adds its
// own members (an id, a status) to the ones it was sent. Asked only of a
// redirect: a 2xx that is the request's value is a store's word on what
// it made (PostgREST's insert with Prefer: return=representation answers
// the row as inserted, a PUT's 200 the representation put).
func echoesRequest(request, answer []byte) bool {
	request, answer = bytes.TrimSpace(trimBOM(request)), bytes.TrimSpace(trimBOM(answer))
	if bytes.Equal(request, answer) {
		return true
	}
	if len(request) == 0 || len(answer) == 0 || answer[0] != '{' && answer[0] != '[' {
		return false
	}
	theirs, ok := decodeWithNumbers(answer)
	if !ok {
		return false
	}
	if request[0] != '{' && request[0] != '[' {
		return formEchoed(request, theirs)
	}
	ours, ok := decodeWithNumbers(request)
	return ok && sameJSON(ours, theirs)
}

// decodeWithNumbers is doc parsed, its numbers kept as written.
func decodeWithNumbers(doc []byte) (any, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// sameJSON reports whether a and b, parsed JSON, are one value: objects
// with the same members, whatever their order, arrays element by
// element, numbers by value (sameNumber), strings and literals equal.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for name, v := range a {
			if w, ok := b[name]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		return ok && sameNumber(string(a), string(b))
	}
	return a == b // a string, a bool or null
}

// sameNumber reports whether a and b, numbers as written, are the number
// a front re-encoding one would write as the other: the same text, or
// the same float64, which is what a JSON parser of JavaScript's or Go's
// reads a number into and writes back.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	x, errX := strconv.ParseFloat(a, 64)
	y, errY := strconv.ParseFloat(b, 64)
	return errX == nil && errY == nil && x == y
}

// formEchoed reports whether answer, parsed JSON, is request, a form, as
// a front that parses a posted form writes it back: an object with a
// member per parameter, its value as a string (or a number of that
// text's value), a repeated one's as an array of them. A bracketed name
// is nested as the parsers of PHP ($_POST), Rack and Express (qs) nest
// it: order[id]=… a member "id" of an object "order", tag[]=… and
// items[0][ref]=… elements of a list (a JSON array, or an object whose
// members are the indexes). Every value sent must be in the answer
// once, and nothing else.
func formEchoed(request []byte, answer any) bool {
	m, ok := answer.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	// Split on "&" alone, as PHP's and Express's parsers split: Go's
	// url.ParseQuery refuses a value holding ";", which they keep.
	root, left := &formNode{}, 0
	for pair := range strings.SplitSeq(string(request), "&") {
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		name, errName := url.QueryUnescape(name)
		value, errValue := url.QueryUnescape(value)
		if errName != nil || errValue != nil {
			return false
		}
		n := root.at(name)
		n.add(value)
		if !strings.Contains(name, "[") {
			n.repeated++
			n.last = value
		}
		left++
	}
	if left == 0 {
		return false
	}
	// PHP's $_POST names a parameter whose name holds "." or " " (or a
	// "[" left open) with "_" in their place: "order.ref" comes back as
	// "order_ref" (php.net, "Variables From External Sources").
	var mangled map[string]string
	for name := range root.members {
		if p := phpName(name); p != name {
			if _, taken := root.members[p]; !taken {
				if mangled == nil {
					mangled = map[string]string{}
				}
				mangled[p] = name
			}
		}
	}
	e := formEcho{left: left}
	for name, v := range m {
		n := root.members[name]
		if n == nil && mangled[name] != "" {
			n = root.members[mangled[name]]
		}
		if n == nil {
			return false
		}
		if s, ok := v.(string); ok && n.repeated > 1 && s == n.last {
			// A name repeated without brackets keeps its last value in
			// PHP's $_POST: the values before it were sent, and dropped
			// by the parser, not by any API.
			e.left -= n.repeated
			clear(n.values)
			continue
		}
		if !e.walk(n, v) {
			return false
		}
	}
	return e.numbers() && e.left == 0
}

// phpName is name as PHP's form parser names its variable: ".", " " and
// "[" become "_".
func phpName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' || r == '[' {
			return '_'
		}
		return r
	}, name)
}

// formNode is a form's parameters under one name, nested as a parser of
// bracketed names nests them: the values given the name, counted, the
// names within it (order[id]) and its list's elements (tag[], items[0]),
// taken as one: which element holds what is not compared, since the
// values sent rearranged are no API's word either, and taken for an echo
// the answer is only left unread.
type formNode struct {
	values  map[string]int
	members map[string]*formNode
	index   *formNode
	floats  map[float64]int // values left, by number, once numbers are matched
	// repeated counts the values given the name itself, unbracketed,
	// and last is the last of them (PHP keeps only it).
	repeated int
	last     string
}

// at is the node of a parameter's name: order[id] is the member "id" of
// "order", and a bracket empty or holding an index a list's element. A
// name whose brackets do not close is a name of its own.
func (n *formNode) at(name string) *formNode {
	base, rest, nested := strings.Cut(name, "[")
	if nested {
		segs := strings.Split(strings.TrimSuffix(rest, "]"), "][")
		if base == "" || !strings.HasSuffix(rest, "]") || slices.ContainsFunc(segs, func(s string) bool { return strings.ContainsAny(s, "[]") }) {
			return n.member(name)
		}
		n = n.member(base)
		for _, seg := range segs {
			if seg == "" || allDigits(seg) {
				if n.index == nil {
					n.index = &formNode{}
				}
				n = n.index
				continue
			}
			n = n.member(seg)
		}
		return n
	}
	return n.member(name)
}

// member is n's member node named name, made if it is new.
func (n *formNode) member(name string) *formNode {
	if n.members == nil {
		n.members = map[string]*formNode{}
	}
	c := n.members[name]
	if c == nil {
		c = &formNode{}
		n.members[name] = c
	}
	return c
}

// add counts value as given at n's name once more.
func (n *formNode) add(value string) {
	if n.values == nil {
		n.values = map[string]int{}
	}
	n.values[value]++
}

// formEcho is formEchoed's walk of an answer: the form's values not yet
// found in it, and its numbers, matched once its strings are (a number
// may be any text of its value; a string only its own).
type formEcho struct {
	left    int
	pending []formNumber
}

type formNumber struct {
	n *formNode
	v json.Number
}

// walk matches v, the answer's value at n's name, with the form's values
// there: a string takes one of the same text, an object's members and
// an array's elements are matched in turn. A list's elements, or a
// repeated name's values, may be an array or an object of indexes.
func (e *formEcho) walk(n *formNode, v any) bool {
	switch v := v.(type) {
	case string:
		if n.values[v] == 0 {
			return false
		}
		n.values[v]--
		e.left--
		return true
	case json.Number:
		e.pending = append(e.pending, formNumber{n, v})
		return true
	case []any:
		elem := n
		if n.index != nil {
			elem = n.index
		}
		for _, w := range v {
			if !e.walk(elem, w) {
				return false
			}
		}
		return len(v) > 0
	case map[string]any:
		for name, w := range v {
			c := n.members[name]
			if c == nil && allDigits(name) {
				if c = n.index; c == nil {
					c = n
				}
			}
			if c == nil || !e.walk(c, w) {
				return false
			}
		}
		return len(v) > 0
	}
	return false // a bool or null: no form's value
}

// numbers matches the answer's numbers with the values left at their
// names: one of the same value (sameNumber's).
func (e *formEcho) numbers() bool {
	for _, num := range e.pending {
		y, err := strconv.ParseFloat(string(num.v), 64)
		if err != nil {
			return false
		}
		n := num.n
		if n.floats == nil {
			n.floats = map[float64]int{}
			for s, count := range n.values {
				if x, err := strconv.ParseFloat(s, 64); err == nil && count > 0 {
					n.floats[x] += count
				}
			}
		}
		if n.floats[y] == 0 {
			return false
		}
		n.floats[y]--
		e.left--
	}
	return true
}
