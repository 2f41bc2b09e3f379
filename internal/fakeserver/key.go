package fakeserver

import (
	"errors"
	"strings"
)

var (
	errKeyEmpty   = errors.New("empty key")
	errKeyLong    = errors.New("key longer than 255 bytes")
	errKeyChar    = errors.New("key has a character outside visible ASCII")
	errKeyQuoting = errors.New("malformed sf-string")
)

// parseKey parses an idempotency key header value: a bare token of visible
// ASCII other than '"' and '\', or an RFC 8941 sf-string ("abc", with \" and
// \\ escapes, printable ASCII inside).
func parseKey(raw string) (string, error) {
	raw = strings.Trim(raw, " \t")
	if raw == "" {
		return "", errKeyEmpty
	}
	var key string
	if raw[0] == '"' {
		var err error
		if key, err = unquoteSFString(raw); err != nil {
			return "", err
		}
	} else {
		for i := 0; i < len(raw); i++ {
			if c := raw[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
				return "", errKeyChar
			}
		}
		key = raw
	}
	if key == "" {
		return "", errKeyEmpty
	}
	if len(key) > MaxKeyLen {
		return "", errKeyLong
	}
	return key, nil
}

// unquoteSFString decodes an RFC 8941 sf-string (section 4.2.5) that must
// span all of s.
func unquoteSFString(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", errKeyQuoting
			}
			b.WriteByte(s[i])
		case c == '"':
			if i != len(s)-1 {
				return "", errKeyQuoting
			}
			return b.String(), nil
		case c < ' ' || c >= 0x7f:
			return "", errKeyChar
		default:
			b.WriteByte(c)
		}
	}
	return "", errKeyQuoting // no closing quote
}
