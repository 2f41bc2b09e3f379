package idem

// scanResult is DecodeJSON's fast path: what unmarshalResult reads from
// the usual answer, one flat object such as
// {"state":"succeeded","resourceId":"ord_1"}, without encoding/json's
// reflection and allocations. It reads member names of printable ASCII
// without escapes, and values that are strings without escapes, numbers,
// true, false or null, the members DecodeJSON reads holding only strings
// of printable ASCII or null ("error" and "errors": null only; "id": a
// number too; "success": any of them). For anything else (nested values,
// escapes, other characters, invalid JSON) ok is false and
// unmarshalResult reads the body. FuzzScanResult holds the two to the
// same reading.
func scanResult(b []byte) (r resultBody, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return r, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return r, skipSpace(b, i+1) == len(b)
	}
	for {
		name, j, ok := scanASCIIString(b, i)
		if !ok {
			return r, false
		}
		i = skipSpace(b, j)
		if i == len(b) || b[i] != ':' {
			return r, false
		}
		i = skipSpace(b, i+1)
		if i, ok = r.member(name, b, i); !ok {
			return r, false
		}
		i = skipSpace(b, i)
		if i == len(b) {
			return r, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return r, skipSpace(b, i+1) == len(b)
		default:
			return r, false
		}
	}
}

// member reads the value at b[i:] of the member name into r, as
// encoding/json would into unmarshalResult's struct (names matched
// without regard to case; a later member overwrites an earlier one),
// and returns the index past it.
func (r *resultBody) member(name, b []byte, i int) (int, bool) {
	names := [memMembers]string{memState: "state", memResourceID: "resourceid", memID: "id", memReason: "reason",
		memKey: "key", memIdemKey: "idempotencykey", memIdemKey2: "idempotency_key", memStatus: "status",
		memError: "error", memErrors: "errors", memJSONRPC: "jsonrpc", memUnsuccessful: "success", memStatusCode: "status_code"}
	m := 0
	for m < memMembers && !foldEqual(name, names[m]) {
		m++
	}
	if m == memMembers {
		return skipScalar(b, i)
	}
	if m == memUnsuccessful {
		// Only the literal false counts: "false" or 0 is no bool.
		r[m] = jsonString{ok: hasLiteral(b, i, "false")}
		return skipScalar(b, i)
	}
	if hasLiteral(b, i, "null") {
		if !plainMember(m) {
			r[m] = jsonString{}
		}
		return i + len("null"), true
	}
	if errorMember(m) {
		return 0, false // whether it holds an error is unmarshalResult's to read
	}
	if (m == memID || m == memStatusCode) && i < len(b) && (b[i] == '-' || '0' <= b[i] && b[i] <= '9') {
		j, ok := skipNumber(b, i)
		if !ok {
			return 0, false
		}
		if m == memID {
			r[m] = idOf(b[i:j])
		} else {
			r[m] = codeOf(b[i:j])
		}
		return j, true
	}
	s, j, ok := scanASCIIString(b, i)
	if !ok {
		return 0, false
	}
	r[m] = jsonString{memberString(m, s), !plainMember(m) || len(s) > 0}
	return j, true
}

// memberString is string(s) for member m, without an allocation for the
// words a "state" holds in the usual answer.
func memberString(m int, s []byte) string {
	if m == memState {
		switch string(s) { // compared in place: no copy is made
		case "succeeded":
			return "succeeded"
		case "failed":
			return "failed"
		case "processing":
			return "processing"
		case "pending":
			return "pending"
		}
	}
	return string(s)
}

// foldEqual reports whether ASCII name is word (lower case) but for case,
// as encoding/json matches member names to fields.
func foldEqual(name []byte, word string) bool {
	return len(name) == len(word) && asciiFold(name, word)
}

// scanASCIIString reads the string at b[i:] if it holds printable ASCII
// only, no escapes, and returns its contents and the index past it.
func scanASCIIString(b []byte, i int) ([]byte, int, bool) {
	if i == len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipScalar skips the value at b[i:] of a member DecodeJSON does not
// read: a string without escapes (encoding/json checks nothing else in
// one), a number, true, false or null.
func skipScalar(b []byte, i int) (int, bool) {
	if i == len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				return j + 1, true
			case c < 0x20 || c == '\\':
				return 0, false
			}
		}
		return 0, false
	case c == '-' || '0' <= c && c <= '9':
		return skipNumber(b, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if hasLiteral(b, i, lit) {
			return i + len(lit), true
		}
	}
	return 0, false
}

// skipNumber skips the JSON number at b[i:]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}
