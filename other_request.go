package idem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/recordable"
	"github.com/idemkit/idem/journal"
)

// A result query asks by key, and a key can hold another request's result:
// a client order id is unique among open orders only (Binance's
// newClientOrderId), so one taken from a business id is free again once
// an earlier order under it has filled, and the query answers that order;
// two services sharing an account or a key space use a key first. When
// the answer describes the order or payment, and the request is journaled,
// the two can be compared: an answer whose side, symbol, quantity, price,
// amount, currency or merchant's reference is not the request's is
// another request's result.

// describingMembers are the members an order or payment API names alike in
// its requests and in its answers about them: what the order or payment
// is. Others (type, status, time in force, ids) are not compared: an
// answer may spell them its own way, or change them as the order runs.
// Deribit names its symbol "instrument_name" in a request and its order
// alike, Coinbase "product_id" ("BTC-USD"). Below the top level, more
// names describe (nestedDescribing).
var describingMembers = [...]string{"symbol", "instrument_name", "product_id", "side", "quantity", "qty", "price", "amount", "currency"}

// Bounds on the nested members a request's body gives for comparison, so
// that a body of any shape costs a bounded walk and a bounded number of
// lookups in each answer.
const (
	nestedDepth = 6  // object levels below the top
	nestedMost  = 32 // members kept
)

// requestEnvelopes are the members a request may wrap its order or
// payment in, whose answer may come without them: Square's CreateOrder
// ({"order": {…}}), GoCardless's {"payments": {…}}, Midtrans's charge
// ({"transaction_details": {"order_id", "gross_amount"}}, its status
// answering "gross_amount" at the top: read at the envelope's path only,
// another order's capture under a reused order_id settled ours).
var requestEnvelopes = [...]string{"data", "order", "payment", "payments", "transaction", "transaction_details"}

// answerAliases maps a request's member to the name an API's answer gives
// the same value, tried when the answer lacks the request's own name:
// Binance answers the quantity an order was placed with as "origQty" (and
// what has filled as "executedQty"), its spot and futures APIs alike
// (developers.binance.com, Query order's response). Deribit's order
// names its side "direction" (private/get_order_state's "buy" or "sell"),
// which its request says in the method (rpcSide).
//
// Adyen's /payments answers the request's "reference" as
// "merchantReference", "The reference to uniquely identify a payment"
// (its API library's PaymentResponse), beside the payment's own
// "pspReference".
var answerAliases = map[string]string{"quantity": "origQty", "side": "direction", "reference": "merchantReference"}

// envelopeMembers are the members an answer may carry its resource in, one
// or two levels down: {"data": {…}}, OKX's {"data": [{…}]}, Bybit's
// {"result": {"list": [{…}]}}, Coinbase's {"order": {…}} (a query's) and
// {"success_response": {…}} (a create's), PayU GPO's order retrieve
// {"orders": [{…}], "status": {"statusCode": "SUCCESS"}}
// (OrderRetrieveResponse): not looked in, another order's retrieve, its
// amount and currency not ours, settled ours succeeded. Paysafe's payments
// lookup by merchantRefNum, {"payments": [{…}], "meta": {…}}, likewise.
var envelopeMembers = [...]string{"data", "result", "order", "list", "success_response", "orders", "payments"}

// amendable are the describing members an order or payment keeps its
// identity through when they change: a resting order's price and quantity
// are amended in place (Bybit's amend-order, Binance's futures Modify
// Order), an authorised payment's amount updated (Adyen's amountUpdates).
// Its symbol, side and currency never are: an answer whose are not the
// request's describes another order whatever resource it names. name is
// a member's own name, however deep and however spelled (an amount
// object's "currency", PayPal's "currency_code", a "currencyCode").
func amendable(name string) bool {
	switch folded(name) {
	case "symbol", "instrumentname", "productid", "side", "currency", "currencycode":
		return false
	}
	return true
}

// otherRequest reports how a result query's answer, answer, describes a
// request other than the journaled body, body (a JSON object or a form):
// a describing member both name at one path, from the answer's top level
// or its envelope's one resource, whose values differ as values (numbers
// by value, "1.00000000" as 1 and "100.00" as 100; words by their letters
// and digits, "BUY" as "buy", "BTC/USD" as "BTCUSD"; a merchant's
// reference as referenceDiffers reads it). "" when nothing
// differs, or nothing can be compared: a member on one side only, at
// another path, or a number on one side and a word on the other proves
// nothing. fixed: a member no amendment changes differs (amendable), the
// one then named.
//
// acted is the request URL's path segments (pathSegments): an answer's
// resource whose own id is one of them is the resource the request acted
// on (a capture's, refund's or cancel's payment), not one it made, and
// its top-level amounts and its merchant's reference are that
// resource's (actedOn). A partly authorised payment's top-level amount
// below the request's is its authorised part (partlyAuthorised).
func otherRequest(body, answer []byte, acted []string) (how string, fixed bool) {
	ours, own := requestMembers(body)
	if len(ours) == 0 {
		return "", false
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(trimBOM(answer)))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return "", false
	}
	for _, res := range resources(doc, 0, own, acted, nil) {
		parent := actedOn(res, acted)
		asked, added, exact := surcharged(own, res)
		partial := partlyAuthorised(own, res)
		for _, m := range ours {
			orderAmount := amendable(m.name) && strings.HasSuffix(folded(m.name), "amount")
			if parent && (topAmount(m.path) && amendable(m.name) || merchantReference(m)) || asked && orderAmount && !exact {
				continue
			}
			theirName := m.path
			their, named := memberAt(res, m.path)
			if name, v, ok := requestedAmount(res, m.path); ok {
				theirName, their, named = name, v, true
			}
			if outer, inner, nested := strings.Cut(m.path, "."); !named && nested && slices.Contains(requestEnvelopes[:], outer) {
				// A request's envelope, answered with the resource alone.
				theirName = inner
				their, named = memberAt(res, inner)
			}
			if !named && answerAliases[m.path] != "" {
				theirName = answerAliases[m.path]
				their = res[theirName]
			}
			w, ok := scalarOf(their)
			if merchantReference(m) {
				// A number is an id of something else.
				_, text := their.(string)
				ok = ok && text
			}
			if ok && asked && orderAmount {
				w, ok = netAmount(w, added)
				theirName += " less its surcharge"
			}
			if ok && partial && topAmount(m.path) && amendable(m.name) && authorisedPart(m.value, w, own, res) {
				continue
			}
			if ok && differs(m, w) && (how == "" || !amendable(m.name)) {
				how = fmt.Sprintf("%s %q, not the request's %s %q", theirName, clipValue(w), m.path, clipValue(m.value))
				if !amendable(m.name) {
					return how, true
				}
			}
		}
	}
	return how, false
}

// differs reports whether w, an answer's value, is surely not m's, a
// request member's: differ, but for a product id naming our order's book
// (oneBook), and a merchant reference compared by referenceDiffers.
func differs(m member, w string) bool {
	switch {
	case merchantReference(m):
		return referenceDiffers(m.value, w)
	case m.name == "product_id" && oneBook(m.value, w):
		return false
	}
	return differ(m.value, w)
}

// merchantReference reports whether m is the merchant's own reference for
// the request: a member named so at any depth (referenceName:
// Worldline Direct's order.references.merchantReference, a
// "client_reference_id"), or a plain "reference" at the body's top level
// (Adyen's, Checkout.com's, Flutterwave's). It tells two requests of one
// amount and currency apart, two 1000 EUR orders under a key that
// collided: without it the replay of the other order's payment settled
// as ours, and ours was never paid. A resource the request acted on
// (actedOn) has its own: Checkout.com's capture, POST
// /payments/{id}/captures with the capture's "reference", found as the
// payment captured, whose "reference" is the payment's.
func merchantReference(m member) bool {
	return m.path == "reference" || referenceName(m.name) || ownID(m.name)
}

// ownID reports whether a member's name, separators and case aside, is
// one an API gives the merchant's own id for the order, echoed as sent:
// PayPal's Orders v2 purchase unit's "invoice_id", "The API
// caller-provided external invoice number for this order", and
// "custom_id", "The API caller-provided external ID. Used to reconcile
// client transactions with PayPal transactions" (Create order's
// purchase_unit_request; the order's purchase_unit answers both). Of two
// orders of one amount and currency under a PayPal-Request-Id that
// collided, it is what tells them apart: uncompared, the other order's
// stored answer was settled as ours.
func ownID(name string) bool {
	switch bareName(name) {
	case "invoiceid", "customid":
		return true
	}
	return false
}

// referenceDiffers reports whether a and b, a request's reference and an
// answer's, surely differ: their letters and digits, case aside, are
// not the same, and b is not a cut of a (referenceCut). A provider may
// write a reference its own way for a bank statement: upper-cased,
// separators dropped. Text beyond ASCII is no evidence: it may come back
// transliterated.
func referenceDiffers(a, b string) bool {
	if !ascii(a) || !ascii(b) {
		return false
	}
	fa, fb := folded(a), folded(b)
	return fa != "" && fb != "" && fa != fb && !referenceCut(a, b)
}

// referenceCuts are the lengths a payment scheme cuts a reference to:
// Faster Payments' 18, SEPA's 25 (as Equals Money sends it), SWIFT's 35
// ("If a payment reference exceeds the limit set by the payment scheme,
// it will be truncated", docs.equalsmoney.com, About payment
// references), SEPA's remittance information's 140. The shortest is 18:
// "Typically, the character limit for payment references is 18
// characters" (TrueLayer's Character limitations in payments).
var referenceCuts = [...]int{18, 25, 35, 140}

// referenceCut reports whether b, an answer's reference, may be a, the
// request's, cut by a scheme: b is a's first characters up to a cut's
// length (referenceCuts) but for the spaces or separators that ended
// them (a bank trims a cut's trailing space). Any other beginning is no
// cut but another reference: sequential order numbers make one of ours
// (ord-12, INV-2026-10, ORDER-2026-12-07-123) begin with another's
// (ord-1, INV-2026-1, ORDER-2026-12-07-12), and taken for a cut, the
// replay of that order's payment settled as ours, and ours was never
// paid; a beginning of any length but a cut's is such a one too.
func referenceCut(a, b string) bool {
	fb := folded(b)
	for _, n := range referenceCuts {
		if len(a) > n && folded(a[:n]) == fb {
			return true
		}
	}
	return false
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// otherRequestOf is otherRequest of rec's body with answer, a request to
// rec's URL acting on what its path names (pathSegments).
func otherRequestOf(rec *journal.Record, answer []byte) (how string, fixed bool) {
	return otherRequest(rec.Body, answer, pathSegments(rec.URL, rec.Key))
}

// resourceIDs are the names an answer gives its resource's own id: "id",
// and Toss Payments' Payment's "paymentKey". Not a name of another
// resource's id (a capture's "payment_id"): an answer naming the parent
// so is the capture, its amount the capture's.
var resourceIDs = [...]string{"id", "paymentKey"}

// pathSegments is the segments of rawURL's path, unescaped, but for empty
// ones and a last one that is key: a path ending in the key names the
// request itself (a create at a client-chosen id), no resource it acts
// on. The key followed by an operation's segment names the resource it
// acts on: a caller capturing an intent once may key the capture by the
// intent's id (POST /payment_intents/{id}/capture).
func pathSegments(rawURL, key string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var segs []string
	for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
		if s, err := url.PathUnescape(seg); err == nil && s != "" {
			segs = append(segs, s)
		}
	}
	if len(segs) > 0 && segs[len(segs)-1] == key {
		segs = segs[:len(segs)-1]
	}
	return segs
}

// actedOn reports whether res, an answer's resource, is the one a request
// to a path of segments acted on: its own id (resourceIDs) is one of
// them. An operation on an existing resource may be answered with that
// resource: Airwallex's capture, POST /api/v1/pa/payment_intents/{id}/
// capture with {"amount": 50}, with the PaymentIntent, whose "amount" is
// the intent's 100 and "captured_amount" what has been captured of it
// (Toss Payments' cancel likewise, componentAmount). Its top-level
// amounts describe that resource, not the operation: compared with the
// request's, they made our own partial capture another request's.
func actedOn(res map[string]any, segments []string) bool {
	for _, name := range resourceIDs {
		if id, ok := scalarOf(res[name]); ok && id != "" && slices.Contains(segments, id) {
			return true
		}
	}
	return false
}

// topAmount reports whether path, a request member's, is an amount at the
// body's top level, or in an amount object there ("amount.value").
func topAmount(path string) bool {
	top, _, _ := strings.Cut(path, ".")
	return strings.HasSuffix(folded(top), "amount")
}

// requestedAmount is res's member that names, beside its own amount, the
// amount a request asked for, when path, a request member's, is a plain
// amount at the body's top level: its name, and the name "requested"
// before or after it (amount_requested, requested_amount). An answer
// giving both says its own amount may be less than the one asked for:
// Checkout.com's payment answers a partial authorization's approved
// amount as "amount" beside "amount_requested" (checkout-sdk-go's
// PaymentResponse), the card's funds short of the request's. Compared
// with the plain amount, our own partly approved payment was another
// request's.
func requestedAmount(res map[string]any, path string) (string, any, bool) {
	f := folded(path)
	if strings.Contains(path, ".") || !strings.HasSuffix(f, "amount") {
		return "", nil, false
	}
	for _, name := range slices.Sorted(maps.Keys(res)) {
		if g := folded(name); g == f+"requested" || g == "requested"+f {
			return name, res[name], true
		}
	}
	return "", nil, false
}

// heldOrderAnswer reports whether a submit's 2xx of status and body may be
// the order another request left under the key, answered in place of a
// new one as if it were: Coinbase Advanced Trade's create "returns" the
// order a client_order_id it holds names "instead", 200 OK and "success":
// true, nothing marking it. Only an answer that names the key, as such an
// order's does, and is no 201 Created (which says this request made it)
// is worth otherRequest's parse: most answers are ruled out by one scan.
func heldOrderAnswer(status int, body []byte, key string) bool {
	return status >= 200 && status < 300 && status != http.StatusCreated && key != "" && bytes.Contains(body, []byte(key))
}

// otherRequestAnswered is j, a fresh submit's 2xx answer's judgment,
// flagged ReviewKeyInUse when the answer describes another request's order
// (a's otherRequest) by a member no amendment changes (otherFixed): the
// key's order, held before ours was sent, answered as if made for it. Ours
// was never placed, and a resend would be answered the same. The order
// is named in the attempt's error, not journaled as the operation's: a
// webhook or Confirm for it must not settle ours. A price or
// quantity alone is no proof: our own order, placed by an earlier attempt
// whose answer was lost, may have been amended since.
func otherRequestAnswered(j judgment, a answer) judgment {
	if !a.otherFixed || !takenAsOurs(j) {
		return j
	}
	return judgment{move: moveReview, label: "submit_other_request", review: ReviewKeyInUse, conflict: true,
		err: fmt.Errorf("idem: the order answered for the key (%q) is another request's, held under it before this one: its %s; ours was never placed: check with the provider, then Resolve",
			truncate(j.out.ResourceID, 64), a.otherRequest)}
}

// takenAsOurs reports whether j takes an answer for this operation's own
// order: a success, or an order in hand. Those are what another
// request's answer must never be taken for; a failure of it is safe,
// nothing of ours having run after it.
func takenAsOurs(j judgment) bool {
	return j.move == moveSettle && j.out.State == StateSucceeded || j.move == moveProcessing
}

// member is one describing member of a request: its path from the body's
// top (names joined by dots, "0" for a list of one's element), its own
// name, and its value.
type member struct{ path, name, value string }

// requestMembers is the describing members of a request's body with one
// scalar value each: a JSON object's (a JSON-RPC call's params'), its top
// level's describingMembers first in their order, then the others
// nestedDescribing names, at its top level or nested in it, in the order
// of their paths; or a form's parameters. own is the names of
// that object's top level: an answer's top-level member of one of them
// answers the request's member, whatever it holds, and is no envelope of
// the resource (resources).
func requestMembers(body []byte) (ours []member, own map[string]any) {
	doc := bytes.TrimSpace(trimBOM(body))
	if len(doc) > 0 && doc[0] == '{' {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&m) != nil {
			return nil, nil
		}
		top := m
		params, rpc := m["params"].(map[string]any)
		if rpc = rpc && m["jsonrpc"] != nil; rpc {
			// A JSON-RPC call carries the order in its params (Deribit's
			// private/buy): its top level names only the call.
			m = params
		}
		side := ""
		if rpc {
			side = rpcSide(top)
		}
		for _, name := range describingMembers {
			v, ok := scalarOf(m[name])
			switch {
			case name == "side" && !ok && side != "":
				v, ok = side, true
			case name == "price" && rpc && m["post_only"] == true && m["reject_post_only"] != true:
				// Deribit places a post-only order that would take at a
				// price "just below the spread" (private/buy's post_only)
				// rather than refuse it: the price sent is not the one it
				// rests at.
				ok = false
			}
			if ok {
				ours = append(ours, member{name, name, v})
			}
		}
		return nestedMembers(m, "", "", 0, ours), m
	}
	form, err := url.ParseQuery(string(doc))
	if err != nil {
		return nil, nil
	}
	for _, name := range describingMembers {
		if vs := form[name]; len(vs) == 1 {
			ours = append(ours, member{name, name, vs[0]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(form)) {
		// A form's currency code of another name: Chargebee's
		// "currency_code" (its payment intents, its invoices).
		if vs := form[name]; len(vs) == 1 && folded(name) == "currencycode" && len(ours) < nestedMost {
			ours = append(ours, member{name, name, vs[0]})
		}
	}
	return ours, nil
}

// nestedMembers appends to ours the describing members of m (m being at
// path prefix, a member named parent), but for the describingMembers of
// the body's top level, which requestMembers reads: an amount object's
// value and currency (Moov's and Adyen's {"amount": {"currency": "USD",
// "value": 1000}}, PayPal's purchase_units' {"amount": {"currency_code":
// "USD", "value": "100.00"}}), a payment wrapped in an envelope (Mercado
// Pago's {"wallet_payment": {"transaction_amount": 700.5}}), a top-level
// amount or currency code of another name (its /v1/payments'
// "transaction_amount", Paddle's "currency_code"). A list is
// followed only when it holds one element: the elements of several may
// come back in another order. A member compared at one path only, the
// request's, never a plain amount against an amount object: a request's
// plain amount may be in major units, an answer's value in minor ones.
func nestedMembers(m map[string]any, prefix, parent string, depth int, ours []member) []member {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if len(ours) >= nestedMost {
			break
		}
		if strings.Contains(name, ".") {
			// Its path would read as another.
			continue
		}
		v := m[name]
		if a, ok := v.([]any); ok && len(a) == 1 && depth < nestedDepth {
			if obj, ok := a[0].(map[string]any); ok {
				ours = nestedMembers(obj, prefix+name+".0.", name, depth+1, ours)
			}
			continue
		}
		if obj, ok := v.(map[string]any); ok && depth < nestedDepth {
			ours = nestedMembers(obj, prefix+name+".", name, depth+1, ours)
			continue
		}
		if s, ok := scalarOf(v); ok && (depth > 0 || !slices.Contains(describingMembers[:], name) && !componentAmount(name)) && nestedDescribing(parent, name) {
			// At the top level, the describing names are requestMembers'
			// own; the rest are read as they are below it: Mercado Pago's
			// /v1/payments sends its "transaction_amount" there, Paddle's
			// transactions their "currency_code". Not a part of the
			// amount: an answer's member of that name may be its parent
			// resource's (componentAmount).
			ours = append(ours, member{prefix + name, name, s})
			continue
		}
		if s, ok := v.(string); ok && s != "" && (referenceName(name) || ownID(name) || depth == 0 && name == "reference") {
			// The merchant's reference (merchantReference), a string
			// only: a number is an id of something else.
			ours = append(ours, member{prefix + name, name, s})
		}
	}
	return ours
}

// nestedDescribing reports whether a member named name, in an object named
// parent, describes an order or payment: one of describingMembers, a
// currency code (PayPal's "currency_code"), an amount of any kind
// (Mercado Pago's "transaction_amount"), or a money object's "value".
func nestedDescribing(parent, name string) bool {
	f := folded(name)
	switch {
	case slices.Contains(describingMembers[:], name), f == "currencycode", strings.HasSuffix(f, "amount"):
		return true
	case f == "value":
		p := folded(parent)
		return strings.HasSuffix(p, "amount") || strings.HasSuffix(p, "money")
	}
	return false
}

// componentAmounts are the parts an amount is counted in that a server
// may count its own way, or that an answer gives for the resource an
// operation acted on rather than for the operation.
var componentAmounts = [...]string{"tax", "vat", "fee", "fees", "tip", "tips", "discount", "coupon", "surcharge"}

// componentAmount reports whether name, a body's top-level member, is a
// part of the amount (a tax, fee, tip or discount amount), not the amount
// itself: no evidence of another request. Toss Payments' partial cancel
// sends the cancel's tax-free part as "taxFreeAmount" and is answered
// with the payment, whose top-level "taxFreeAmount" is the payment's
// (docs.tosspayments.com/guides/apis/cancel-payment).
func componentAmount(name string) bool {
	f := folded(name)
	stem, ok := strings.CutSuffix(f, "amount")
	if !ok {
		return false
	}
	for _, c := range componentAmounts {
		if strings.HasPrefix(stem, c) || strings.HasSuffix(stem, c) {
			return true
		}
	}
	return false
}

// rpcSide is the side a JSON-RPC call's method names, Deribit's
// private/buy and private/sell, or "".
func rpcSide(call map[string]any) string {
	method, _ := call["method"].(string)
	switch {
	case strings.HasSuffix(method, "/buy"):
		return "buy"
	case strings.HasSuffix(method, "/sell"):
		return "sell"
	}
	return ""
}

// memberAt is m's member at path, names joined by dots, each a member of
// the object the one before names, or "0" for a list of one's element.
func memberAt(m map[string]any, path string) (any, bool) {
	var v any = m
	for name := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[name]; !ok {
				return nil, false
			}
		case []any:
			if len(x) != 1 || name != "0" {
				return nil, false
			}
			v = x[0]
		default:
			return nil, false
		}
	}
	return v, true
}

// resources appends to into the objects of doc that may be the resource an
// answer describes: doc itself, or its only element, and so on down its
// envelope members to depth 2, but for doc's own members that own, the
// request's top level, names too: those are the answer's copy of the
// request's member, compared path by path from doc (otherRequest), not
// the resource wrapped. Adyen's /payments takes the partial-payments
// order a payment is part of as "order", {"pspReference", "orderData"},
// and answers it as "order" with the order's "amount", "The initial
// amount of the order", beside the payment's own (CheckoutOrderResponse):
// read as the resource, it made a part payment another request's.
// Besides, a payment's output (paymentOutput, but for one acted on, its id
// among acted, the request's path segments) and a lone wrapper's resource
// (loneWrapped).
func resources(doc any, depth int, own map[string]any, acted []string, into []map[string]any) []map[string]any {
	if a, ok := doc.([]any); ok {
		if len(a) != 1 {
			// A list of several is a search's: which one is the key's is
			// the decoder's to say.
			return into
		}
		doc = a[0]
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return into
	}
	into = append(into, m)
	if out, ok := paymentOutput(m, acted); ok {
		into = append(into, out)
	}
	if res, ok := loneWrapped(m); ok && depth == 0 {
		into = append(into, res)
	}
	if depth < 2 {
		for _, name := range envelopeMembers {
			if _, asked := own[name]; asked && depth == 0 {
				continue
			}
			if v, ok := m[name]; ok {
				into = resources(v, depth+1, nil, acted, into)
			}
		}
	}
	return into
}

// paymentOutput is the payment details of m, an answer's object, when it
// wraps a payment as Worldline Direct's CreatePayment answers one,
// {"payment": {"id", "paymentOutput": {"amountOfMoney": {"amount",
// "currencyCode"}, …}, "status"}} (its SDKs' CreatePaymentResponse),
// for the request's {"order": {"amountOfMoney": {…}}}: the replay of
// another request's payment, "the same outcome as the original request,
// even with different payloads", was read nowhere and settled as ours.
// Only a "payment" holding a "paymentOutput": a "payment" of any shape
// may be the parent an operation acted on (a refund's, a capture's),
// whose amount is not the operation's. Nor one whose id is among acted,
// the request's path segments (actedOn): Worldline's CancelPayment, POST
// …/payments/{paymentId}/cancel with the part to cancel as its
// "amountOfMoney", answers {"payment": …} with the payment's own amount,
// which made our partial cancel another request's.
//
// Its CreatePayout answers the payout itself, {"id", "payoutOutput":
// {"amountOfMoney", "references": {"merchantReference"}, …}, "status"}
// (PayoutResponse), for the request's top-level "amountOfMoney" and
// "references": read nowhere, the replay of another request's payout of
// our amount and currency, only its merchantReference not ours, settled
// as ours, and our payee was never paid.
func paymentOutput(m map[string]any, acted []string) (map[string]any, bool) {
	if out, ok := m["payoutOutput"].(map[string]any); ok && !actedOn(m, acted) {
		return out, true
	}
	payment, _ := m["payment"].(map[string]any)
	out, ok := payment["paymentOutput"].(map[string]any)
	return out, ok && !actedOn(payment, acted)
}

// loneWrappers are the members Chargebee wraps the resource an operation
// made or changed in, alone in its answer: {"payment_intent": {…}},
// {"invoice": {…}} (apidocs.chargebee.com; chargebee-node's
// PaymentIntent.CreateResponse and Invoice.CreateForChargeItemsAndCharges
// Response).
var loneWrappers = [...]string{"payment_intent", "invoice"}

// loneWrapped is the resource m, an answer's top level, wraps when it is
// one of loneWrappers and m's only member. Not one beside others: an
// answer that expands a related object in place (Stripe's expand[] of a
// refund's "payment_intent") carries that object's amounts, not the
// request's.
func loneWrapped(m map[string]any) (map[string]any, bool) {
	if len(m) != 1 {
		return nil, false
	}
	for _, name := range loneWrappers {
		if res, ok := m[name].(map[string]any); ok {
			return res, true
		}
	}
	return nil, false
}

// surcharged reports whether own, a request's top level, asks for its
// order to be surcharged, and the surcharge res, an answer's resource,
// tells applied: Worldline Direct's order.amountOfMoney is "The net
// amount (without the surcharge)" when the order asks for surcharging
// (order.surchargeSpecificInput), and its payment tells the surcharge
// applied (paymentOutput.surchargeSpecificOutput.surchargeAmount). added
// is that surcharge in minor units, exact when it is told as an integer
// (2530 or 2530.0, minorUnits) in the payment's own currency: the
// answer's amount less it is then the request's net amount. Not exact,
// the amounts may differ for our own payment and only its currency is
// compared: a surcharge told in another currency than the payment's
// amountOfMoney cannot be subtracted from it (subtracted, our own 1000
// EUR surcharged 30 USD read as 970 EUR, another request's). A
// surcharge the request did not ask for proves
// nothing of ours: surcharging is defined in the request (Worldline's
// "The following properties define the surcharge of your order in a
// CreateHostedCheckout/CreatePayment request"), so such an answer's
// amount is compared as it is.
func surcharged(own, res map[string]any) (asked bool, added int64, exact bool) {
	order, _ := own["order"].(map[string]any)
	if _, asked = order["surchargeSpecificInput"].(map[string]any); !asked {
		return false, 0, false
	}
	out, ok := res["surchargeSpecificOutput"].(map[string]any)
	if !ok {
		// Asked, none applied (Worldline surcharges commercial cards
		// only): the answer's amount is the net one.
		return true, 0, true
	}
	amount, _ := out["surchargeAmount"].(map[string]any)
	v, ok := scalarOf(amount["amount"])
	if !ok {
		return true, 0, false
	}
	paid, _ := res["amountOfMoney"].(map[string]any)
	if theirs, ours := currencyCodeOf(amount), currencyCodeOf(paid); theirs != "" && ours != "" && theirs != ours {
		return true, 0, false
	}
	added, exact = minorUnits(v)
	return true, added, exact
}

// partlyAuthorised reports whether res, an answer's resource, is a
// payment authorised for part of its amount that own, a request's top
// level, allowed to be: Adyen's /payments takes
// "additionalData.allowPartialAuth = true"
// (docs.adyen.com/payment-methods/cards/partial-authorisations) and
// answers resultCode "PartiallyAuthorised", "The payment has been
// authorised for a partial amount", its "amount" the "Authorised amount
// in the transaction" (Checkout API, PaymentResponse). Compared with the
// amount asked for, our own partly authorised payment was another
// request's, as if ours had never been made.
func partlyAuthorised(own, res map[string]any) bool {
	extra, _ := own["additionalData"].(map[string]any)
	allowed := extra["allowPartialAuth"]
	code, _ := res["resultCode"].(string)
	return (allowed == true || allowed == "true") && code == "PartiallyAuthorised"
}

// authorisedPart reports whether approved, res's amount, may be the part
// authorised of asked, the amount own, a request's top level, asked for:
// both numbers, approved above nothing and below asked. A greater amount
// is another request's. So is one that, with the remainingAmount of the
// order res answers, does not make asked: an order partly authorised is
// paid in parts of one reference (Adyen's "collect the outstanding
// balance", a payment naming the order), and each part's authorised
// amount may be below the other's asked; a part's answer whose order's
// balance cannot be read is ours only to a request that names no order.
func authorisedPart(asked, approved string, own, res map[string]any) bool {
	x, xk := decimal(asked)
	y, yk := decimal(approved)
	if xk != number || yk != number || y.Sign() <= 0 || y.Cmp(x) >= 0 {
		return false
	}
	order, _ := res["order"].(map[string]any)
	remaining, _ := order["remainingAmount"].(map[string]any)
	rest, ok := scalarOf(remaining["value"])
	if !ok {
		_, onOrder := own["order"]
		return !onOrder
	}
	z, zk := decimal(rest)
	return zk == number && z.Add(z, y).Cmp(x) == 0
}

// currencyCodeOf is an amount object's "currencyCode", folded ("" when
// it has none).
func currencyCodeOf(amount map[string]any) string {
	code, _ := amount["currencyCode"].(string)
	return folded(code)
}

// minorUnits is s, an amount in minor units, as an integer, written
// either way a JSON number of integer value may be (1030, 1030.0);
// false for any other value (a fraction of a minor unit, an exponent,
// a word).
func minorUnits(s string) (int64, bool) {
	r, kind := decimal(s)
	if kind != number || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// netAmount is gross, an answer's amount in minor units, less added, the
// surcharge it counts; false when gross is no integer (minorUnits), the
// net then unknown. A negative one, no amount a payment has, is left as
// it is.
func netAmount(gross string, added int64) (string, bool) {
	n, ok := minorUnits(gross)
	if !ok {
		return "", false
	}
	if n < 0 || added < 0 {
		return gross, true
	}
	return strconv.FormatInt(n-added, 10), true
}

// scalarOf is v as text if it is a string or a number.
func scalarOf(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

// differ reports whether a and b are surely different values: both
// decimal numbers of different value, or both words whose letters and
// digits differ, case aside. Anything else is no evidence.
func differ(a, b string) bool {
	x, xk := decimal(a)
	y, yk := decimal(b)
	switch {
	case xk == number && yk == number:
		return x.Cmp(y) != 0
	case xk != word || yk != word:
		return false
	}
	fa, fb := folded(a), folded(b)
	return fa != "" && fb != "" && fa != fb
}

// oneBook reports whether two product ids, a and b, name one order book:
// Coinbase trades a USD product and its USDC twin on one book and names
// either by the other (Get Product's BTC-USD has "alias_to":
// ["BTC-USDC"]; a USDC product's orders and streams come back named by
// the USD one, ccxt/ccxt#26465), so an answer naming our order by its
// book's other id is about our order, not another request's.
func oneBook(a, b string) bool {
	usd := func(s string) string {
		s = folded(s)
		if strings.HasSuffix(s, "usdc") {
			return s[:len(s)-1]
		}
		return s
	}
	return usd(a) == usd(b)
}

// valueKind is how differ reads a value.
type valueKind int

const (
	word   valueKind = iota
	number           // plain decimal digits, a sign, one point
	// unread: a number in a form differ does not read (an exponent,
	// which big.Rat would expand to as many digits as a hostile server
	// asks for), or over 64 bytes: no evidence either way.
	unread
)

// decimal reads s as a plain decimal number.
func decimal(s string) (*big.Rat, valueKind) {
	s = strings.TrimSpace(s)
	digits := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits = true
		case c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E':
		default:
			return nil, word
		}
	}
	switch {
	case !digits:
		return nil, word
	case len(s) > 64 || strings.ContainsAny(s, "eE"):
		return nil, unread
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, unread
	}
	return r, number
}

// folded is s's letters and digits, lower case: separators and case are
// spelling ("BTC-USDT", "btc_usdt", "BTCUSDT").
func folded(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case 'A' <= r && r <= 'Z':
			b.WriteRune(r + 'a' - 'A')
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r >= utf8.RuneSelf:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clipValue bounds a value quoted in an attempt's error.
func clipValue(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return recordable.Clip(s, n) + "…"
}

// namesHeld reports whether body, an answer, names held as its own id: a
// top-level "id", "name" or "operationId" whose value it is. A status
// monitor names its operation so throughout, and once the operation
// succeeded the resource it made beside it (Microsoft Graph's
// richLongRunningOperation: "id", then "resourceId" and
// "resourceLocation"; Google's Operation: "name", then "response"): a
// decoder that reads the resource then is reading the held operation's
// result, not a second resource made for the key. So is one whose lone
// "data" envelope (dataResource) holds such an object, as DecodeJSON
// reads it.
func namesHeld(body []byte, held string) bool {
	if held == "" {
		return false
	}
	body = trimBOM(body)
	if idNamed(body, held) {
		return true
	}
	data, ok := dataResource(body)
	return ok && idNamed(data, held)
}

// idNamed reports whether the JSON object body has held as a top-level
// "id", "name" or "operationId".
func idNamed(body []byte, held string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	for name, raw := range top {
		switch strings.ToLower(name) {
		case "id", "name", "operationid", "operation_id":
			var s string
			if json.Unmarshal(raw, &s) == nil && s == held {
				return true
			}
		}
	}
	return false
}
