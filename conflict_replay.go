package idem

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/idemkit/idem/journal"
)

// Some servers answer a request under a key they have processed with 409
// Conflict and the first request's answer as it was, unmarked: Interchecks
// (docs-v2.interchecks.com/docs/idempotent-requests) and DOKU
// (developers.doku.com, Idempotency Request). Read as the key in flight,
// such an answer was waited on and resent until the key window passed,
// never settled. Most 409s are the key in flight, and some carry a
// resource that is not the key's (the existing record a create collides
// with), so only one that shows it is about this request is taken for the
// stored answer: the key's value at a body member named as a key, or
// the request's own reference at the same member.

// conflictReplay reads a 409 answer to a submit of rec as the server's
// stored answer for the key: the completed resource it carries, as
// createdResource names one (id, and "failed" when DecodeJSON reads it as
// failed). Both "" when the answer does not show it is about rec's
// request, or DecodeJSON, reading the body as a 202 Accepted's, reads no
// completed resource with an id in it (a processing one says nothing a
// wait would not), or the client reads its answers with a Decoder of its
// own.
func (c *Client) conflictReplay(rec *journal.Record, ex exchange) (id, state string) {
	if !c.cfg.decodeIsJSON {
		// A Decoder reads 2xx answers (Decoder's promise): one may read
		// any other status as the operation's failure, as clients do
		// of a decline that comes 402 with the payment in it (Paysafe),
		// and a paid payout would be reported failed.
		return "", ""
	}
	// Not an echoed key header: servers that echo one (DOKU's
	// Request-Id) echo it on every answer, so it says the 409 is to this
	// request, not that the resource in it is the one the key created.
	if !c.namesRequest(rec, ex) {
		return "", ""
	}
	// The 409 repeats the first answer's body without its status code,
	// and a 202 Accepted's resource is held unfinished whatever its body
	// says short of a finished status ("PENDING" is no status DecodeJSON
	// knows): read as a 201's, a payout whose 202 was lost, or held
	// processing, settled succeeded while it could still be declined.
	// Read as the 202 it may have been, only a status that says the
	// work is done settles it.
	ans := Answer{
		Scope: rec.Scope, Key: rec.Key, Method: rec.Method, URL: rec.URL, RequestBody: rec.Body,
		StatusCode: http.StatusAccepted, Header: ex.header, Body: ex.body,
	}
	out, err := DecodeJSON(&ans)
	if err != nil || out.ResourceID == "" {
		return "", ""
	}
	switch out.State {
	case StateSucceeded:
		return out.ResourceID, ""
	case StateFailed:
		return out.ResourceID, "failed"
	}
	return "", ""
}

// namesRequest reports whether the resource in a 409 replay, which may be
// another request's, is rec's request's: a member named as a key holds
// the key (holdsKey), or the answer holds the request's own reference at
// the same member (echoesReference). The key's value under any other
// name (an order_id, a description) shows only what the resource is
// about.
func (c *Client) namesRequest(rec *journal.Record, ex exchange) bool {
	return holdsKey(ex.body, rec.Key, c.bodyKeyName(rec)) || echoesReference(rec.Body, ex.body)
}

// holdsKey reports whether answer, a JSON document, holds key as the
// value of a member named as a key (keyMember; keyName is the header or
// body member the request carries it in), at any depth up to
// maxKeyDepth. A key taken from a business id (the order number) is a
// value other resources carry under their own names: every payment of
// the order names it as its order_id, an invoice's payments as their
// invoice, and the key's value there shows only what the resource is
// about. A member named as the merchant's reference is taken only for a
// distinctive key (distinctiveKey), as echoesReference takes the
// request's own reference: a short key ("1001", a row's number) is
// another order's number too, and that order's payment names it as its
// merchantRefNum.
func holdsKey(answer []byte, key, keyName string) bool {
	doc, ok := parseNaming(answer, key)
	return ok && keyMemberHolds(doc, key, bareName(keyName), distinctiveKey(key), 0)
}

// resourceHoldsKey is holdsKey of the answer's resource alone, its top
// level or its envelope's one (resources): not a key quoted deeper, in a
// request a front keeps to send on after its login.
func resourceHoldsKey(answer []byte, key, keyName string) bool {
	doc, ok := parseNaming(answer, key)
	if !ok {
		return false
	}
	name, ref := bareName(keyName), distinctiveKey(key)
	for _, res := range resources(doc, 0, nil, nil, nil) {
		for member, v := range res {
			if s, ok := v.(string); ok && s == key && keyMember(member, name, ref) {
				return true
			}
		}
	}
	return false
}

// parseNaming is answer, a JSON document, parsed if it may hold key.
func parseNaming(answer []byte, key string) (any, bool) {
	// A JSON encoder may write some of the key's bytes escaped (PHP's
	// json_encode "/" as "\/", Go's encoding/json "&" as "\u0026"): the
	// same value in other bytes, which only a parse finds.
	if !strings.ContainsAny(key, `"\/<>&'`) && !bytes.Contains(answer, []byte(key)) {
		return nil, false // most answers: no parse
	}
	var doc any
	if json.Unmarshal(trimBOM(answer), &doc) != nil {
		return nil, false
	}
	return doc, true
}

// maxKeyDepth bounds holdsKey's walk: an echoed key is in the resource or
// one or two objects down (DOKU's "headers": {"request_id": …}).
const maxKeyDepth = 4

// keyMemberHolds is holdsKey's walk of doc at depth; ref says whether a
// member named as the merchant's reference may hold the key.
func keyMemberHolds(doc any, key, keyName string, ref bool, depth int) bool {
	if depth > maxKeyDepth {
		return false
	}
	switch v := doc.(type) {
	case []any:
		for _, e := range v {
			if keyMemberHolds(e, key, keyName, ref, depth+1) {
				return true
			}
		}
	case map[string]any:
		for name, e := range v {
			if s, ok := e.(string); ok {
				if s == key && keyMember(name, keyName, ref) {
					return true
				}
				continue
			}
			if keyMemberHolds(e, key, keyName, ref, depth+1) {
				return true
			}
		}
	}
	return false
}

// keyMember reports whether a member's name says it holds the request's
// key: the name the request carries it under (keyName, bare), an
// idempotency key's or request id's of this request ("idempotency_key",
// "request_id", "X-Request-Id", "client_request_id": ownKey), or, with
// ref, the request's own reference's (referenceName). One named for
// another request ("original_request_id", a refund's of the payment it
// refunds) holds that request's key.
func keyMember(name, keyName string, ref bool) bool {
	b := bareName(name)
	if keyName != "" && b == keyName || ref && referenceName(name) {
		return true
	}
	for _, w := range [...]string{"idempotencykey", "idempotencekey", "requestkey", "requestid", "key"} {
		if owner, ok := strings.CutSuffix(b, w); ok && slices.Contains(ownKey[:], owner) {
			return true
		}
	}
	return false
}

// ownKey are what may stand before a key's or request id's name when it
// is this request's: nothing, a header's "x", or whose it is as the
// client's own ("unique_request_id": Currencycloud's).
var ownKey = [...]string{"", "x", "client", "merchant", "external", "partner", "unique"}

// echoesReference reports whether answer, a JSON object (or its envelope's
// one resource), holds one of the request body's own references at the
// same member: a top-level string member named as the merchant's own
// reference (referenceName: "merchantRefNum", "client_reference_id")
// whose value is distinctive (distinctiveKey), as an API echoes the
// merchant's reference in the resource it made for it. Other ids a
// request names (a recipient's, the order a refund is of) are shared by
// other requests.
func echoesReference(body, answer []byte) bool {
	var req map[string]any
	if json.Unmarshal(bytes.TrimSpace(trimBOM(body)), &req) != nil {
		return false
	}
	var doc any
	if json.Unmarshal(trimBOM(answer), &doc) != nil {
		return false
	}
	for _, res := range resources(doc, 0, nil, nil, nil) {
		for name, v := range req {
			ours, ok := v.(string)
			if !ok || !distinctiveKey(ours) || !referenceName(name) {
				continue
			}
			if theirs, ok := res[name].(string); ok && theirs == ours {
				return true
			}
		}
	}
	return false
}

// referenceName reports whether a member's name says it is the
// request's own reference: it ends in "ref", "reference", "refnum",
// "refid" or "referenceid", separators and case aside, and says before
// that whose it is as the merchant's own (ownReference). A reference
// named for another party or thing is shared by every request about it:
// the shopper's (Adyen's shopperReference), the customer's, the original
// payment's of a recurring series (Request Network's
// originalRequestPaymentReference), an invoice's. So, at many APIs, is
// one named for no one: Wise's transfer "reference" is the text the
// recipient sees on a bank statement, which an invoice's instalments or
// a month's rent each carry.
func referenceName(name string) bool {
	b := bareName(name)
	for _, w := range [...]string{"ref", "reference", "refnum", "refid", "referenceid"} {
		if owner, ok := strings.CutSuffix(b, w); ok && slices.Contains(ownReference[:], owner) {
			return true
		}
	}
	return false
}

// ownReference are what stand before a reference's name when it is the
// merchant's own for this request ("merchantRefNum",
// "client_reference_id", "external_reference").
var ownReference = [...]string{"merchant", "client", "external", "partner"}
