package idem

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
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
// text's value), a repeated one's as an array of them.
func formEchoed(request []byte, answer any) bool {
	form, err := url.ParseQuery(string(request))
	m, ok := answer.(map[string]any)
	if err != nil || !ok || len(form) == 0 || len(form) != len(m) {
		return false
	}
	for name, vs := range form {
		v, ok := m[name]
		if !ok {
			return false
		}
		if list, ok := v.([]any); ok && len(vs) > 1 {
			if len(list) != len(vs) {
				return false
			}
			for i := range vs {
				if !formValue(vs[i], list[i]) {
					return false
				}
			}
			continue
		}
		if len(vs) != 1 || !formValue(vs[0], v) {
			return false
		}
	}
	return true
}

// formValue reports whether v, a parsed JSON value, is a form's value s
// written back.
func formValue(s string, v any) bool {
	switch v := v.(type) {
	case string:
		return v == s
	case json.Number:
		return sameNumber(s, string(v))
	}
	return false
}
