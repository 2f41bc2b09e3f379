package idem

import (
	"net/url"
	"slices"
	"strings"
)

// missingOther reports whether a result query's error body says that
// something other than the operation does not exist: the merchant, the
// API key or token the query was made with, the account (Cielo's
// {"Message":"Merchant not found"} to an unknown MerchantId, AEON's
// "Merchant does not exist", a gateway's "API key not found"), or a part
// of the query itself (queryParts: Hasura's 200 "field 'orders' not found
// in type: 'query_root'", PostgREST's "column … does not exist"). Such a
// refusal never looked for the operation: it is no "not found" of the
// endpoint's, and a resend on its word could execute the operation
// twice. The subject is the word before "not found" or "does not
// exist" (past the verbs between: "was not found", "could not be
// found"), or after "no such" the last word of the phrase it opens, up to
// a preposition or a mark ("No such client order ID": GOPAX's 10221 for
// an order its client order id names, no client's; "No such customer:
// 'cus_1'"). Not a subject the operation's URL,
// target, names ("Customer not found" of an operation POSTed to
// /v1/customers): that is the operation's own "not found".
func missingOther(body []byte, target string) bool {
	if u, err := url.Parse(target); err == nil {
		target = u.Path
	}
	var named []string
	words, ends, prose := phrases(strings.ToLower(string(body)))
	for i, w := range words {
		var subject int
		switch {
		case w == "found" && i > 0 && (words[i-1] == "not" || words[i-1] == "be" && i > 1 && words[i-2] == "not"):
			subject = before(words, i-1)
		case (w == "exist" || w == "exists") && i > 0 && slices.Contains(negations[:], words[i-1]):
			subject = before(words, i-1)
		case w == "such" && i > 0 && words[i-1] == "no" && i+1 < len(words):
			subject = head(words, ends, i+1)
		default:
			continue
		}
		if subject < 0 {
			continue
		}
		noun := otherSubject(words, prose, subject)
		if noun == "" {
			continue
		}
		if named == nil {
			named = pathWords(target)
		}
		if !slices.ContainsFunc(named, func(w string) bool { return w == noun || w == noun+"s" || w == noun+"es" }) {
			return true
		}
	}
	return false
}

// pathWords is path's words, lower-cased: its runs of letters and
// digits, a camelCase run split where a capital follows a small letter
// ("/v1/merchantAccounts": "merchant", "accounts"). A subject is the
// path's only if one of them is its noun, or its plural: "app" is no
// word of "/v1/applepay", nor "token" of "/v1/tokenization".
func pathWords(path string) []string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if 'A' <= c && c <= 'Z' && i > 0 && 'a' <= path[i-1] && path[i-1] <= 'z' {
			b.WriteByte(' ')
		}
		b.WriteByte(c)
	}
	words, _, _ := phrases(strings.ToLower(b.String()))
	return words
}

// phrases is s's words, its runs of ASCII letters and digits, and for
// each whether a phrase ends after it: a mark other than a space, a hyphen
// or an underscore ("payment_intent" is one phrase) before the next word,
// or none; and whether it is a word of prose, a space or a colon after it
// at once (SQLite's "no such column: client_order_id"), where a quote
// closes a JSON member's name ("type": …).
func phrases(s string) (words []string, ends, prose []bool) {
	start, mark := -1, false
	for i := 0; i <= len(s); i++ {
		if i < len(s) && ('a' <= s[i] && s[i] <= 'z' || '0' <= s[i] && s[i] <= '9') {
			if start < 0 {
				if len(words) > 0 {
					ends[len(ends)-1] = mark
				}
				start, mark = i, false
			}
			continue
		}
		if start >= 0 {
			words, ends, prose = append(words, s[start:i]), append(ends, true), append(prose, i < len(s) && (s[i] == ' ' || s[i] == ':'))
			start = -1
		}
		if i < len(s) && !strings.ContainsRune(" \t\n\r-_", rune(s[i])) {
			mark = true
		}
	}
	return words, ends, prose
}

// maxPhrase bounds how many words head reads after "no such".
const maxPhrase = 4

// phraseStops are the words that end the noun phrase of a "no such": what
// follows says where or whose ("No such merchant with ID 5", "no such
// order for this account").
var phraseStops = [...]string{"with", "for", "in", "of", "at", "on", "by", "from", "to", "under", "matching", "or", "and",
	"exists", "exist", "found", "is", "was"}

// head is the index of the last word of the phrase that opens at words[i]
// (ends, phrases'): its noun, which the words before it qualify.
func head(words []string, ends []bool, i int) int {
	j := i
	for j+1 < len(words) && j+1-i < maxPhrase && !ends[j] && !slices.Contains(phraseStops[:], words[j+1]) {
		j++
	}
	return j
}

// negations are the words a "does not exist" may end its negation with
// ("doesn't" is two words here, "doesn" and "t").
var negations = [...]string{"not", "t", "never"}

// maxJoin bounds the joining words before walks over: "could not be
// found" has two between its subject and the word before "found". Unbounded,
// an answer of "not exist" again and again had every "exist" walk back
// over all the words before it.
const maxJoin = 4

// before is the index of the word ahead of words[i], past a negation's
// and the verbs that join a subject to it ("is", "was", "could", "be",
// "does", "doesn"), at most maxJoin of them, or -1.
func before(words []string, i int) int {
	for j := i - 1; j >= 0 && j >= i-1-maxJoin; j-- {
		switch words[j] {
		case "not", "does", "do", "did", "doesn", "didn", "t", "is", "was", "are", "were", "be", "been", "could", "can", "cannot", "has", "have", "exist":
			continue
		}
		return j
	}
	return -1
}

// otherSubjects are what a query may be refused for not finding that is
// no operation: whom the query is made for or with.
var otherSubjects = [...]string{"merchant", "merchants", "mid", "token", "apikey", "credential", "credentials", "account", "customer",
	"user", "client", "partner", "tenant", "organization", "store", "shop", "terminal", "wallet", "profile", "app", "application"}

// keyOwners are the words before "key" that make it a credential ("API
// key", "secret key"), not the idempotency key, whose "not found" is
// the endpoint's own.
var keyOwners = [...]string{"api", "access", "secret", "merchant", "public", "private", "client", "app"}

// queryParts are what a query is written with, whose "not found" is the
// query's own mistake, never the operation missing: a GraphQL schema's
// field or type (Hasura's "field 'orders' not found in type:
// 'query_root'", to a valid query while its metadata reloads or from a
// role the field is hidden from, hasura/graphql-engine#7366; its "no such
// type exists in the schema: …"), a database's table or column
// (PostgreSQL's "column orders.client_order_id does not exist", SQLite's
// "no such column: client_order_id" and "no such table: orders"), the
// method a status lookup is asked about (Galileo's Get Call Status,
// 583-01 "The request method name does not exist").
var queryParts = [...]string{"field", "type", "relation", "table", "column", "method"}

// otherSubject is the noun of words[i], the subject of a "not found",
// when it is one of otherSubjects (as a word, or with "id" after it:
// "merchant id", "merchantId") or a credential's key ("API key": "key"),
// or one of queryParts, itself or the kind of the name it is (up to
// maxPhrase words of it: "field 'orders'", "column
// orders.client_order_id"), else "". A part is a word of prose
// (phrases): not a member's name, as RFC 9457's "type" or the "type" of
// {"error":{"type":"not_found",…}} is.
func otherSubject(words []string, prose []bool, i int) string {
	for j := i; j >= 0 && j >= i-maxPhrase; j-- {
		if prose[j] && slices.Contains(queryParts[:], words[j]) {
			return words[j]
		}
	}
	w := words[i]
	if (w == "id" || w == "ids") && i > 0 {
		i--
		w = words[i]
	}
	switch {
	case slices.Contains(otherSubjects[:], w):
		return strings.TrimSuffix(w, "s")
	case len(w) > 2 && strings.HasSuffix(w, "id") && slices.Contains(otherSubjects[:], strings.TrimSuffix(w, "id")):
		return strings.TrimSuffix(w, "id")
	case w == "key" && i > 0 && slices.Contains(keyOwners[:], words[i-1]):
		return "key"
	}
	return ""
}
