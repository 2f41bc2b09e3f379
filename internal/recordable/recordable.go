// Package recordable holds the bounds the journal sets on what it records
// from outside a request (a confirmation's ids, a resolution's who and
// why), so that the client, the journal, the admin handler and the idem
// command refuse the same input with their own words: a check that
// drifted in one of them would let a name through that the journal then
// refuses, after the operator was told it was fine.
package recordable

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxID is the most bytes an identifier takes (a confirmation's Source
// and EventID; a resolution's By): every later write of the record
// rewrites it.
const MaxID = 255

// MaxResourceID is the most bytes a provider's resource id takes (an
// answer's, a confirmation's, a resolution's): a provider's own id, not
// ours to shorten, which the caller uses to find the resource and an event
// names whole. AWS documents ARNs of up to 2048 bytes; an Azure resource
// id is the resource's path (/subscriptions/…/resourceGroups/…/providers/
// …), 300 bytes and more for a nested one.
const MaxResourceID = 2048

// MaxReason is the most bytes a reason takes (a confirmation's or a
// resolution's): longer notes belong elsewhere, linked.
const MaxReason = 1024

// Name reports whether s, an identifier from outside (an event's, a
// provider's, an operator's), is valid UTF-8 without control characters.
// A newline or a NUL in one is never a real id, and would forge lines in
// the operator tool's output and in plain-text logs.
func Name(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// Clip is s cut to at most n bytes, at a rune's boundary: what a server
// or a decoder gave, bounded before the journal keeps it.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
