// Package httpsyntax holds the HTTP grammar checks that the client and the
// fake server share, so both refuse the same header names.
package httpsyntax

import "strings"

// ValidHeaderName reports whether name is an RFC 9110 token, the only
// thing net/http will send as a header field name.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b <= ' ' || b >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, b) >= 0 {
			return false
		}
	}
	return true
}
