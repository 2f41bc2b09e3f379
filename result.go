package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/idemkit/idem/journal"
)

// Result is what is known of an operation's outcome when a call returns.
type Result struct {
	Scope      string
	Key        string
	State      State
	ResourceID string // the server's id for what it created; may be empty
	// StatusCode and Body: the response that settled the operation,
	// its body size-capped; 0 and nil if none did (a confirmation or a
	// resolution). When one settled it while this call's own request was
	// on the wire and the server's answer agreed, or contradicted a
	// failure (the call then ends in ErrNeedsReview), they are that
	// answer's, for this call only: the journal keeps the settlement as
	// it was made. A credential the request carried that the answer
	// quotes is REDACTED in Body and Reason, as in the journal
	// (AttemptEvent.Err says which).
	StatusCode int
	Body       []byte
	Reason     string // why it failed or needs review, for people
	// Review is non-empty when a person must settle the operation,
	// whatever State says: a failed Result with Review set may have
	// executed (never retry it under a new key), a succeeded one may
	// have executed twice, or a failure contradicts it, or (ReviewKeyInUse)
	// the success may be another request's that used the key, and ours
	// never made: not one to ship on.
	Review    string
	Attempts  int  // HTTP exchanges over the operation's life
	Manual    bool // settled by hand (Resolve)
	Confirmed bool // settled by an external confirmation (Confirm)
	// Replayed: the settling answer was the server's stored response for
	// the key (Idempotent-Replayed: true, or a 409 naming the resource
	// the key created), not a fresh execution. On a processing Result:
	// the resource it names came from such an answer or from a result
	// query, both the server's word for the key, not for this request.
	Replayed bool
	// KeyConflict: a failed Result whose settling answer was the server
	// refusing the key as used with another request's body, as
	// errors.Is(err, ErrKeyConflict) says on the call. Under a key that
	// is the order's id it is not a refusal of the order: an earlier
	// request for it, in other bytes, may have paid it. Look it up at
	// the provider before refusing or retrying the order. Derived from
	// the journaled answer, never journaled, and read with the options
	// of the Client handing it out (WithKeyConflictStatus,
	// WithKeyHeader, WithKeyInBody): a Client configured otherwise,
	// another replica's or one after a deploy that changed them, may
	// read the same record otherwise; give replicas the same options.
	KeyConflict bool
}

// newResult is what rec says of the operation's outcome. The Result
// shares rec's response body: rec must be the caller's own, as every
// record a Store returns is (journaltest's DeepCopy), and not used to
// change the body after.
func (c *Client) newResult(rec *journal.Record) *Result {
	r := &Result{
		Scope:    rec.Scope,
		Key:      rec.Key,
		State:    rec.State,
		Review:   rec.Review,
		Attempts: attemptCount(rec),
		Manual:   rec.Resolved != nil,
	}
	for i := range rec.Confirmations {
		r.Confirmed = r.Confirmed || rec.Confirmations[i].Effect == journal.ConfirmSettled
	}
	if rec.Result != nil {
		r.ResourceID = rec.Result.ResourceID
		r.StatusCode = rec.Result.StatusCode
		if b := rec.Result.Body; len(b) > 0 {
			r.Body = b[:len(b):len(b)] // an append by the caller copies
		}
		r.Reason = rec.Result.Reason
		r.Replayed = rec.Result.Replayed
	}
	if r.Reason == "" && rec.Review != "" {
		r.Reason = rec.Review
	}
	r.KeyConflict = c.settledKeyConflict(rec)
	return r
}

// settledKeyConflict reports whether rec settled failed, unflagged and
// not by hand, on an answer refusing the key (keyConflict), read as it
// was when it settled the operation: Do's ErrKeyConflict and
// Result.KeyConflict both come from here, so they never disagree.
func (c *Client) settledKeyConflict(rec *journal.Record) bool {
	r := rec.Result
	if rec.State != StateFailed || rec.Review != "" || r == nil || rec.Resolved != nil {
		return false
	}
	name := c.keyName(rec, r.StatusCode)
	return c.keyConflict(reusedVerdict(c.verdict(r.StatusCode), r.StatusCode, r.Body, name), r.StatusCode, r.Body, name, rec)
}

// Outcome is what a Decoder read from a response body.
type Outcome struct {
	State      State // StateSucceeded, StateFailed or StateProcessing
	ResourceID string
	Reason     string
}

// Answer is one 2xx response as a Decoder sees it, with what it answers:
// the operation's key and journaled request, so that a decoder can refuse
// a body that names another key or another request.
type Answer struct {
	Scope, Key  string
	Method, URL string // the journaled request
	RequestBody []byte // the journaled body; do not modify
	Query       bool   // the answer to a result query, not to a submit
	StatusCode  int
	Header      http.Header
	Body        []byte
	Replayed    bool // the server marked it as its stored answer for the key
}

// A Decoder reads the outcome from a 2xx response of a submit or of a result
// query. An error means the body does not prove anything: idem treats the
// answer as ambiguous and checks again, never as success. It is also
// given a submit's 302 or 303 whose body or headers name the key (PayU
// GPO answers an order create 302, the order in its body): there only a
// success or "processing" it reads counts, and anything else leaves the
// redirect the ambiguous answer it was. A submit's
// answer it reads as failed is not failed when its words say the key's
// request is still in progress (a GraphQL userError such as Shopify's
// IDEMPOTENCY_CONCURRENT_REQUEST: the key in flight), nor is any answer,
// a result query's too, that is a GraphQL INTERNAL_SERVER_ERROR or
// Braintree's errorClass INTERNAL or SERVICE_AVAILABILITY (a 500 in an
// envelope: ambiguous); see
// ExampleWithDecoder_graphql for reading a GraphQL mutation. A result
// query's answer saying the server holds nothing for the key is
// ErrResultNotFound.
type Decoder func(a *Answer) (Outcome, error)

// ErrResultNotFound is what a Decoder returns, wrapped or not, for a
// result query's answer (Answer.Query) that says the server holds no
// request under the key, in a shape of the API's own: a
// {"status":"not_found"}, a {"found":false}, an error code it documents
// for an unknown key (HTX's "base-record-invalid" from getClientOrder).
// idem weighs it as the endpoint's own 404: "not found" is not "never
// happened" (a read path lags its writes), so with the key in the body
// the request is sent again only once its last send is older than
// WithResultLag, and a header key's server de-duplicates the resend.
// Return it only for an answer about this key's request: a "not found"
// of anything else (the merchant, the credential, a field of the query)
// is a plain error, and one whose words idem reads so is a query that
// failed, as the endpoint's 404 saying so is, whatever the Decoder
// returned; so is a GraphQL request error (top-level "errors" and no
// "data") or internal error, or a server's failure in an envelope: they
// searched for nothing; and so is one page of a list or search whose
// pager says more follow (a true "has_more", a next page's token or
// cursor, a Link to rel="next"): the order may be on a later page. A plain error leaves the answer to idem's own
// reading of the body: one carrying an error (an "error" member, an
// envelope's error code) is a query that failed, asked again; a JSON
// body with no error that does not name the key, a search that found
// nothing, as ErrResultNotFound is. To a submit's answer
// ErrResultNotFound proves nothing, as any error.
var ErrResultNotFound = errors.New("idem: the result endpoint holds nothing for the key")

// errUndecodable marks a 2xx body that proves nothing.
var errUndecodable = errors.New("idem: response body does not decode to a result")

// DecodeJSON is the default Decoder. It accepts a JSON object with
// "state" ("succeeded", "failed", "processing"; "pending" means processing,
// but beside an "id" and a "checkout_url" or a "setup_order_id" it is an
// order created to be paid at that page, or a subscription whose setup
// order its customer is to pay, Revolut Merchant's, read as a resource
// created)
// and "resourceId" (required for succeeded; for failed an "id" stands
// in for it), plus an optional "reason"; or a
// plain resource object with an "id" that is a non-empty string or a
// positive integer (Mercado Pago's payments: its digits are the resource
// id; no other number names a resource), whose status is its "status",
// or its "state" when that holds none of the words above (Revolut
// Business's transactions: "completed", "declined") and "status" holds
// none of those below (a "state" that is a Reference to a State,
// {"typeId":"state","id":…}, is a commercetools Order's place in its
// project's own workflow, no status: read as if absent), taken as succeeded
// (as processing when the status is 202 Accepted: not completed, unless
// its status says it is done: "authorized" or "authorised",
// "captured", "paid", "succeeded", "completed", "approved", "settled",
// "card verified", as in Checkout.com's 202 replay of a processed
// payment, or ISO 20022's settled "ACSC" or "ACCC") unless
// its status says the server refused to carry it out: "failed",
// "failure", "declined", "rejected", "refused", "denied", "soft_declined", a Pix
// refund's "NAO_REALIZADO", ISO 20022's "RJCT" or Cybersource's
// "AUTHORIZED_RISK_DECLINED" and "INVALID_REQUEST" (in any case, spaces around it ignored) make it failed, with the status as the reason, "error" or
// "errored" prove nothing, and "NotStarted", "Running" or "InProgress"
// make it processing whatever the status code: a long-running
// operation's status monitor (the Azure REST API Guidelines' and ARM's,
// polled with 200 OK while it runs), whose "id" names the operation,
// says its work is not done; so do "declining" and "failing", a refusal
// under way, and "authentication_verified", "authorisation_started",
// "authorisation_passed" and "completing", a payment the server is still
// authorising or completing (Revolut Merchant's payments), and "unknown",
// one whose server cannot say yet how it ended (Mastercard Send's
// transfers after a timeout towards the receiving bank). A payment
// waiting for its customer ("authentication_challenge": the 3-D Secure
// challenge the body names) is created: the caller needs that body now,
// as for any payment created pending. A payment created declined
// (Checkout.com's "Declined", Mercado Pago's "rejected", PayPal's
// "DECLINED") is a failed payment, not a success. So is a PayPal order whose payments (purchase_units[].payments'
// captures and authorizations) all have such a status, whatever the
// order's own ("COMPLETED"); one with some declined and some not proves
// nothing. So does a resource the request acted on (its id in the
// request's path before an operation's segment: Primer's refund, POST
// /payments/{id}/refund, answered
// with the Payment, still SETTLED) whose last "transactions" element of
// the action's kind ("transactionType" or "type" REFUND) and of the
// request's "amount", the refund's, has a "processorStatus" (or
// "status") of such a word, whatever the resource's own: the refusal may
// be an earlier request's, the refund asked for not listed yet. In a
// result query's answer, the payment a capture, refund, void or cancel
// acted on proves nothing unless its status says that action was done to
// it ("captured", or "settled", "paid", "succeeded", "completed", to a
// capture; "refunded" to a refund; "voided", "canceled" or "cancelled"
// to a void or cancel): any other is how that payment stands, whether or
// not the action reached it (Checkout.com's payment, still "Authorized"
// to a capture never received), and so is one whose "captured" is false
// to a capture (Stripe's Charge, "succeeded" once authorised). A status
// that is a code of digits (Thunes' transactions'
// "90000") is read as the word beside it, "status_class_message" or else
// "status_message" ("DECLINED"); so is an object naming such a code,
// by its "class"'s "message" or else its own (DT One's transactions:
// {"id":90000,"message":"DECLINED","class":{"id":9,…}}). Any other status is taken as the
// resource's creation succeeding. One that a created resource reaches later ("canceled",
// "voided", "expired", "refunded") is no failure of the call: the order
// or payment was made, and a caller told "failed" might make it again;
// but a "canceled" or "cancelled" whose "id" is the key (a UUID key in
// any case, with or without its hyphens) is the status
// monitor of the key's own operation (the Azure REST API Guidelines'
// monitor, named by its Operation-Id) saying the work was not done:
// failed; unless the request made its resource at the key (its path ends
// in the key, or its body's "id" is the key) and the answer holds more
// than a monitor's members: that resource was made.
// APIs whose resources may be created in a state that is not yet an
// outcome (a payment "pending" its authorisation), or that say a failure
// another way (Adyen's "resultCode"), need a Decoder that reads it:
// WithDecoder.
// A body whose only member is a "data" object, or that and a "meta"
// (Paddle Billing's and Circle's answers), is read as the object under
// "data" when that object has a "status" or "state" of its own; any other
// member beside it (a GraphQL "errors", an envelope's "status" or "code",
// JSON:API's "links") or no status under it proves nothing. A Berlin
// Group (NextGenPSD2) payment initiation, a "paymentId" with a
// "transactionStatus" that is one of ISO 20022's codes (RCVD, PDNG,
// ACTC, ACCP, ACSP, ACSC, ACCC, CANC…; RJCT failed) and no "status", is
// read as that payment with that status; another word there proves
// nothing.
// A body that echoes a key ("idempotencyKey", "idempotency_key", or "key"
// beside "state") must echo the operation's own: an answer about another
// key proves nothing about this one. Nor does a body that carries an error
// (an "error" or "errors" member that is not null or empty) or says
// "success": false (Paymob's declined and pending transactions, beside
// their "id"), or has a "status_code" that is an HTTP error's number
// (Midtrans's refusals, 200 OK with the error's "id"; not beside a
// "status" word but a refusal's or the code's own reason phrase ("Not
// Found", "NOT_FOUND" beside 404, as snapd's envelope names its
// error), which it numbers: dLocal's CANCELLED payment is "400"),
// unless its "state" is "failed", nor a JSON-RPC answer (a
// "jsonrpc" member) without one of the "state" words above: its "id" is
// the call's, not a resource's.
// A submit answered 201 Created or 204 No Content with no body at all
// (Klarna's captures and cancels) succeeded: the status is the server's
// whole answer. A 201's resource is the last segment of its Location's
// path. An empty answer to a result query, or an empty 200 or 202,
// proves nothing. A UTF-8 byte order mark before the JSON is ignored.
func DecodeJSON(a *Answer) (Outcome, error) {
	if out, ok := noContent(a); ok {
		return out, nil
	}
	return decodeObject(a, trimBOM(a.Body), false)
}

// decodeObject is DecodeJSON's reading of body, a's body or (inData) the
// resource its top-level "data" member holds (dataResource).
func decodeObject(a *Answer, body []byte, inData bool) (Outcome, error) {
	v, ok := scanResult(body)
	if !ok {
		var err error
		if v, err = unmarshalResult(body); err != nil {
			return Outcome{}, fmt.Errorf("%w: %v", errUndecodable, err)
		}
	}
	echoes := [...]jsonString{v[memIdemKey], v[memIdemKey2], {}}
	if v[memState].ok {
		echoes[2] = v[memKey]
	}
	for _, e := range echoes {
		if e.ok && e.s != a.Key {
			return Outcome{}, fmt.Errorf("%w: the body names key %q, not %q", errUndecodable, truncate(e.s, 64), a.Key)
		}
	}
	// Midtrans answers its refusals 200 OK, the error's own "id" beside
	// its "status_code" ({"status_code":"406","status_message":…,"id":…}).
	// Beside a resource's "status" word it is that status's own number:
	// dLocal's CANCELLED payment is "status_code":"400" (resourceWord).
	errCode := v[memStatusCode].ok && httpError(json.RawMessage(v[memStatusCode].s)) &&
		!(v[memStatus].ok && resourceWord(v[memStatus].s, json.RawMessage(v[memStatusCode].s)))
	if v[memError].ok || v[memErrors].ok || v[memUnsuccessful].ok || errCode {
		// A 2xx that carries an error (a JSON-RPC error answer, with the
		// call's "id" beside it), or says "success": false (Paymob's
		// declined or pending transaction, its "id" beside it), is no
		// proof of success: its "id" is not a resource made as asked.
		if !v[memState].ok || !strings.EqualFold(strings.TrimSpace(v[memState].s), "failed") {
			what := "carries an error"
			switch {
			case v[memUnsuccessful].ok:
				what = `says "success": false`
			case errCode:
				what = fmt.Sprintf("has status_code %q", truncate(v[memStatusCode].s, 16))
			}
			return Outcome{}, fmt.Errorf("%w: the body %s", errUndecodable, what)
		}
	}
	if inData && !v[memState].ok && !v[memStatus].ok {
		// A resource under "data" is read only by its own status: an
		// object there without one may keep it elsewhere (JSON:API's
		// "attributes"), where a "failed" would go unread.
		return Outcome{}, fmt.Errorf("%w: the object under \"data\" has no \"status\"", errUndecodable)
	}
	if !v[memState].ok {
		if v[memID].s == "" {
			if data, ok := dataResource(body); ok && !inData {
				return decodeObject(a, data, true)
			}
			if id, st, ok := paymentInitiation(body); ok && !v[memStatus].ok {
				return resourceOutcome(a, body, id, st)
			}
			return Outcome{}, fmt.Errorf("%w: no \"state\" and no \"id\"", errUndecodable)
		}
		if v[memJSONRPC].ok {
			// A JSON-RPC answer's "id" is the call's, and what the call did
			// is in "result", in a shape of the method's own.
			return Outcome{}, fmt.Errorf("%w: a JSON-RPC answer: its \"id\" is the call's", errUndecodable)
		}
		return resourceOutcome(a, body, v[memID].s, v[memStatus])
	}
	// The resource's own "id", when the body has one that names it (not a
	// JSON-RPC call's).
	id := v[memID].s
	if v[memJSONRPC].ok {
		id = ""
	}
	resourceID, reason := v[memResourceID].s, v[memReason].s
	if resourceID == "" {
		resourceID = id
	}
	switch s := strings.ToLower(strings.TrimSpace(v[memState].s)); s {
	case "succeeded":
		if v[memResourceID].s == "" {
			return Outcome{}, fmt.Errorf("%w: succeeded without \"resourceId\"", errUndecodable)
		}
		return Outcome{State: StateSucceeded, ResourceID: resourceID, Reason: reason}, nil
	case "failed":
		return Outcome{State: StateFailed, ResourceID: resourceID, Reason: reason}, nil
	case "processing", "pending":
		if s == "pending" && id != "" && awaitsCustomer(body) {
			return resourceOutcome(a, body, id, v[memState])
		}
		// Only "resourceId" names the resource held for the key: an "id"
		// beside a running state may be a job's or the request's, and a
		// later answer naming the resource made would read as a second
		// one (ReviewMadeTwice). Revolut's pending transfer settles by
		// the read-back, which names its id.
		return Outcome{State: StateProcessing, ResourceID: v[memResourceID].s}, nil
	default:
		if id == "" {
			return Outcome{}, fmt.Errorf("%w: unknown state %q", errUndecodable, s)
		}
		// A resource object whose status is named "state" (Revolut
		// Business's transactions: "completed", "declined", "reverted",
		// developer.revolut.com/docs/business/create-transfer): read
		// as any resource's status is. Unless a "status" beside it says
		// more: that "state" may be an address's (EasyPost's Address
		// object), and a "status" "failed" must not be read as a
		// resource made.
		st := v[memState]
		if v[memStatus].ok && resourceStatusOf(v[memStatus].s) != statusOther {
			st = v[memStatus]
		}
		return resourceOutcome(a, body, id, st)
	}
}

// resourceOutcome reads a plain resource object, named id, whose own
// status is st (see DecodeJSON).
func resourceOutcome(a *Answer, body []byte, id string, st jsonString) (Outcome, error) {
	st = statusWord(body, st)
	if st.ok && operationCanceled(st.s) && isKey(id, a.Key) && (!namesKeyItself(a) || monitorShaped(body)) {
		return Outcome{State: StateFailed, ResourceID: id, Reason: truncate(st.s, 64)}, nil
	}
	done := false
	if st.ok {
		switch resourceStatusOf(st.s) {
		case statusFailed:
			return Outcome{State: StateFailed, ResourceID: id, Reason: truncate(st.s, 64)}, nil
		case statusError:
			return Outcome{}, fmt.Errorf("%w: the resource's status is %q", errUndecodable, truncate(st.s, 64))
		case statusRunning:
			// A long-running operation's status monitor: the work
			// asked for has not finished, whatever the status code.
			return Outcome{State: StateProcessing, ResourceID: id}, nil
		case statusDone:
			done = true
		}
	}
	if a.Query && !actionShown(a, body, id, st) {
		// A result query answered with the payment a capture, refund or
		// void acted on (Checkout.com has no lookup by key: an action is
		// seen at GET /payments/{id}) says how that payment stands,
		// whether or not the action reached it: still Authorized to a
		// capture never received, it settled the capture succeeded, and
		// the capture was never sent again.
		why := fmt.Sprintf("whose status %q does not say the %s was done to it", truncate(st.s, 64), truncate(actionOf(a), 64))
		if actionOf(a) == "capture" && uncaptured(body) {
			why = `which says "captured": false`
		}
		return Outcome{}, fmt.Errorf("%w: it names only %q, the resource this request acted on, %s", errUndecodable, truncate(id, 64), why)
	}
	if bytes.Contains(body, []byte(`"purchase_units"`)) {
		switch declined, all, status := orderPayments(body); {
		case declined > 0 && declined == all:
			return Outcome{State: StateFailed, ResourceID: id, Reason: truncate(status, 64)}, nil
		case declined > 0:
			// One payment taken, another declined: "failed" could have
			// the taken one made again.
			return Outcome{}, fmt.Errorf("%w: %d of the order's %d payments are %q", errUndecodable, declined, all, truncate(status, 64))
		}
	}
	if err := actionDeclined(a, body, id); err != nil {
		// The resource is the one the request acted on, not one it made:
		// the payment's own status is not the refund's outcome.
		return Outcome{}, err
	}
	if a.StatusCode == http.StatusAccepted && !done {
		// The resource exists, but 202 says its work is not done: an
		// asynchronous order may still be declined.
		return Outcome{State: StateProcessing, ResourceID: id}, nil
	}
	return Outcome{State: StateSucceeded, ResourceID: id}, nil
}

// operationCanceled reports whether s, the status of a resource whose id
// is the operation's key, says the operation was canceled: the Azure REST
// API Guidelines' status monitor, named by the Operation-Id its client
// passed (idem's key), ends "Succeeded", "Failed" or "Canceled", its
// "error" given only when "Failed" (github.com/microsoft/api-guidelines,
// azure/Guidelines.md, lro-status-monitor-structure), and azure-core's
// pollers take "Canceled" for a failure. A canceled operation did not do
// the work asked; read as a resource that reached "canceled" after it was
// made, it settled succeeded. A resource the server named itself keeps
// that reading.
func operationCanceled(s string) bool {
	s = strings.TrimSpace(s)
	return strings.EqualFold(s, "canceled") || strings.EqualFold(s, "cancelled")
}

// monitorMembers are the members of a status monitor of the Azure REST
// API Guidelines (azure/Guidelines.md, lro-status-monitor-structure:
// "id", "status", "error" and the times and progress its services add),
// none of them the resource's own. Not "result", which a monitor holds
// only once "Succeeded" and many resources wrap themselves in.
var monitorMembers = []string{"id", "status", "error", "resourceLocation", "percentComplete",
	"createdDateTime", "lastActionDateTime", "lastUpdatedDateTime", "startTime", "endTime"}

// monitorShaped reports whether body, a JSON object, has no member but a
// status monitor's (monitorMembers): a PUT /widgets/{key} whose client
// passed the key as its Operation-Id too is polled at a monitor named
// by the key, and its "Canceled", read as the widget's own state, told
// the caller a widget never made was made. An order read back at its
// client-chosen id carries its own members (its quantity, its fills).
func monitorShaped(body []byte) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return false
	}
	for name := range members {
		if !slices.Contains(monitorMembers, name) {
			return false
		}
	}
	return true
}

// namesKeyItself reports whether a's request made its resource at the key:
// its path ends in the key (PUT /v1/orders/{key}, a create at a
// client-chosen id) or its body's own "id" is the key. That resource's
// "id" is the key too, and its "canceled" is a state it reached after it
// was made (an IOC order partly filled, the rest canceled): read as a
// canceled operation, the order that executed settled failed, and its
// caller, told so, ordered again. A status monitor is another resource
// than the request's, polled at its own path.
func namesKeyItself(a *Answer) bool {
	if segs := pathSegments(a.URL, ""); len(segs) > 0 && isKey(segs[len(segs)-1], a.Key) {
		return true
	}
	var body struct {
		ID string `json:"id"`
	}
	return json.Unmarshal(a.RequestBody, &body) == nil && body.ID != "" && isKey(body.ID, a.Key)
}

// isKey reports whether id, a resource's "id", is key: as it was
// sent, or, when key is a UUID, in any form a UUID is written in. An
// Azure service may compare a UUID its customer passed without regard to
// case (azure/Guidelines.md, http-url-case-sensitivity) and write back
// its own form: the key's monitor named so, its "Canceled" settled
// succeeded.
func isKey(id, key string) bool {
	if id == key {
		return true
	}
	canonical, _ := uuidTexts(key)
	other, _ := uuidTexts(id)
	return canonical != "" && other == canonical
}

// awaitsCustomer reports whether body, a resource whose "state" is
// "pending", is one created to be paid by its customer at what it names:
// Revolut Merchant's order is created "pending" and stays so until its
// customer pays at its "checkout_url" or in the widget its "token" opens
// (developer.revolut.com/docs/guides/merchant/reference/order-lifecycle:
// "pending: Order is created via the Merchant API"), and its
// subscription is created "pending" until its customer pays the order
// its "setup_order_id" names (developer.revolut.com/docs/merchant/create-subscription).
// Read as the key's request running, it was asked again until the budget
// ran out and left unknown, the caller never given the page or order its
// customer must pay, so it stayed pending for ever. Made, as a payment
// waiting for its customer's 3-D Secure challenge is.
func awaitsCustomer(body []byte) bool {
	if !bytes.Contains(body, []byte(`"checkout_url"`)) && !bytes.Contains(body, []byte(`"setup_order_id"`)) {
		return false
	}
	var v struct {
		CheckoutURL string `json:"checkout_url"`
		SetupOrder  string `json:"setup_order_id"`
	}
	return json.Unmarshal(body, &v) == nil && (strings.TrimSpace(v.CheckoutURL) != "" || strings.TrimSpace(v.SetupOrder) != "")
}

// statusWord is a resource's status word: st, or, when st is a code of
// digits (Thunes' transactions: "90000", docs.thunes.com/money-transfer/v2),
// the word the body gives beside it, "status_class_message" (its class's:
// "DECLINED" for "90201") or else "status_message". A code read as a word
// is none of the failed ones: a transaction its payer declined was settled
// as made.
func statusWord(body []byte, st jsonString) jsonString {
	if !st.ok {
		return codedStatus(body, st)
	}
	if !allDigits(st.s) || !bytes.Contains(body, []byte(`"status_`)) {
		return st
	}
	var v struct {
		Class   string `json:"status_class_message"`
		Message string `json:"status_message"`
	}
	switch {
	case json.Unmarshal(body, &v) != nil:
	case strings.TrimSpace(v.Class) != "":
		return jsonString{v.Class, true}
	case strings.TrimSpace(v.Message) != "":
		return jsonString{v.Message, true}
	}
	return st
}

// codedStatus is the word of a "status" that is an object naming a code
// of digits, a number or a string, and its word: DT One's DVS
// transactions' {"id":90000,"message":"DECLINED","class":{"id":9,
// "message":"DECLINED"}} (github.com/dtone/dtone-dvs-api-java-client,
// dto/Status.java; dvs-api-doc.dtone.com), Thunes' codes in an object of
// their own. Its class's word, or else its own. Read as no status, a
// top-up its operator declined was settled as made. Any other object
// there (an envelope's {"code":…,"message":…}) is left unread: st.
func codedStatus(body []byte, st jsonString) jsonString {
	if !bytes.Contains(body, []byte(`"status"`)) {
		return st
	}
	var v struct {
		Status struct {
			ID      json.RawMessage `json:"id"`
			Message string          `json:"message"`
			Class   struct {
				Message string `json:"message"`
			} `json:"class"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &v) != nil {
		return st
	}
	id := bytes.Trim(v.Status.ID, `"`)
	if len(id) == 0 || !allDigits(string(id)) {
		return st
	}
	switch {
	case strings.TrimSpace(v.Status.Class.Message) != "":
		return jsonString{v.Status.Class.Message, true}
	case strings.TrimSpace(v.Status.Message) != "":
		return jsonString{v.Status.Message, true}
	}
	return st
}

// dataResource is the object a body's top-level "data" member holds when
// nothing but a "meta" is beside it: the resource itself, as Paddle
// Billing answers ({"data":{"id":"txn_…","status":"ready",…},"meta":
// {"request_id":…}}, developer.paddle.com/api-reference/about/success-responses)
// and Circle ({"data":{"id":…,"status":"pending",…}},
// developers.circle.com/api-reference/circle-mint/payments/create-payment).
// Not beside anything else: an "errors" there is GraphQL's partial
// answer, a "code" or "status" an envelope's own word on the call,
// a "jsonapi" or "links" JSON:API's document, whose resource keeps its
// status under "attributes".
func dataResource(body []byte) (json.RawMessage, bool) {
	if !bytes.Contains(body, []byte(`"data"`)) {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil, false
	}
	data, ok := top["data"]
	if _, meta := top["meta"]; !ok || len(top) > 2 || len(top) == 2 && !meta {
		return nil, false
	}
	return data, len(data) > 0 && data[0] == '{'
}

// paymentInitiation reads a Berlin Group NextGenPSD2 payment initiation:
// its "paymentId" and its "transactionStatus", one of the ISO 20022 codes
// the standard lists ({"transactionStatus":"RCVD","paymentId":"1234-wertiq-983",
// "_links":{…}}; the codes as Barclays' PSD2 API describes them,
// github.com/api-evangelist/barclays json-schema/barclays-initiate-payment-response-schema.json).
// Any other word there, or none, proves nothing: not every API that has
// a "transactionStatus" speaks ISO 20022 (Nuvei's APPROVED, DECLINED,
// ERROR, REDIRECT, beside a "status" that is its call's).
func paymentInitiation(body []byte) (id string, status jsonString, ok bool) {
	if !bytes.Contains(body, []byte(`"transactionStatus"`)) {
		return "", jsonString{}, false
	}
	var v struct {
		PaymentID         string `json:"paymentId"`
		TransactionStatus string `json:"transactionStatus"`
	}
	if json.Unmarshal(body, &v) != nil || v.PaymentID == "" {
		return "", jsonString{}, false
	}
	switch strings.ToUpper(strings.TrimSpace(v.TransactionStatus)) {
	case "RCVD", "PDNG", "ACTC", "ACCP", "ACFC", "ACWC", "ACWP", "PATC", "PART",
		"ACSP", "ACSC", "ACCC", "RJCT", "CANC":
		return v.PaymentID, jsonString{v.TransactionStatus, true}, true
	}
	return "", jsonString{}, false
}

// trimBOM is body without a leading UTF-8 byte order mark, which RFC
// 8259 lets a JSON parser ignore and encoding/json refuses: servers on
// .NET's Encoding.UTF8 write one, and an answer read as undecodable for
// it would leave every operation of theirs unknown.
func trimBOM(body []byte) []byte {
	return bytes.TrimPrefix(body, []byte("\ufeff"))
}

// noContent reads a submit answered 201 Created or 204 No Content without
// a body (Klarna's captures and cancels): the status is the server's
// whole answer that it did what was asked, and no body will ever come to
// say more, so resending could only get it again. The resource a 201
// created is the last segment of its Location's path, as REST APIs name
// it. Not a result query's: a search answered 204 found nothing. Nor a
// 200's or 202's: the one says nothing without its body, the other that
// the work is not done.
func noContent(a *Answer) (Outcome, bool) {
	if a.Query || len(bytes.TrimSpace(a.Body)) > 0 {
		return Outcome{}, false
	}
	switch a.StatusCode {
	case http.StatusNoContent:
		return Outcome{State: StateSucceeded}, true
	case http.StatusCreated:
		out := Outcome{State: StateSucceeded}
		if u, err := url.Parse(headerValue(a.Header, "Location")); err == nil {
			// The segment is cut from the escaped path: an escaped '/' is
			// part of the id.
			seg := path.Base(strings.TrimRight(u.EscapedPath(), "/"))
			if id, err := url.PathUnescape(seg); err == nil && id != "." && id != "/" {
				out.ResourceID = id
			}
		}
		return out, true
	}
	return Outcome{}, false
}

// orderPayments reads the payments of a PayPal order, whose own status
// says COMPLETED when its payment was declined too ("Check the payment
// status in purchase_units[].payments.captures[].status before
// fulfilling the order",
// developer.paypal.com/api/orders/v2/definitions/order_status): how many
// of its captures and authorizations there are, how many of them failed
// (resourceStatusOf: DECLINED, FAILED, DENIED) and the first failed one's
// status.
func orderPayments(body []byte) (declined, all int, status string) {
	var v struct {
		PurchaseUnits []struct {
			Payments struct {
				Captures       []struct{ Status string } `json:"captures"`
				Authorizations []struct{ Status string } `json:"authorizations"`
			} `json:"payments"`
		} `json:"purchase_units"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0, 0, ""
	}
	for _, u := range v.PurchaseUnits {
		for _, p := range append(u.Payments.Captures, u.Payments.Authorizations...) {
			all++
			if resourceStatusOf(p.Status) == statusFailed {
				if declined == 0 {
					status = p.Status
				}
				declined++
			}
		}
	}
	return declined, all, status
}

// actionDeclined reports, as an error (errUndecodable), an answer body
// naming id that is the resource a's request acted on (its id a segment
// of the request's path, pathSegments, an operation's segment after it)
// whose last transaction for such a request, in "transactions", was
// refused (resourceStatusOf its "processorStatus", else its "status").
// Primer answers a refund, POST /payments/{id}/refund, with the Payment,
// still SETTLED whatever became of the refund, the refund's outcome being
// its transaction's ("processorStatus": SETTLED or FAILED,
// primer.io/docs/api-reference/endpoints/v2.4/payment-webhooks/payment-refund):
// read by the payment's status, a declined refund settled succeeded and
// the customer was never refunded.
//
// Nor is it read failed: a refusal read as ours is refunded or paid
// again, and the refusal listed may be an earlier request's, ours not
// listed yet (Primer's own example answer lists the sale alone; the
// refund's webhook comes once it "has been fully processed"): a refund
// declined under one key and asked again under another was answered with
// the first one's FAILED. The answer proves nothing: the operation stays
// unknown, asked again under its key, for a result endpoint or a person.
// Only a transaction that may be the request's counts (actionTransaction):
// the last of the action's kind (a "transactionType" or "type" that is
// the path's last segment, "REFUND" for /refund) and of the request's
// "amount", if both give one; another request's of another amount listed
// after ours (a payment refunded in parts at once), or one of another
// kind (Recurly's invoice marked paid, PUT /invoices/{id}/mark_successful,
// lists the declined collection before it) says nothing. Not a resource
// updated at its own path, whose transactions are not the request's doing
// (SumUp's checkout processed at PUT /v0.1/checkouts/{id} may list a
// failed attempt beside the one that paid), nor a transaction's "state",
// which commercetools' Payment carries for what its caller recorded.
func actionDeclined(a *Answer, body []byte, id string) error {
	if !bytes.Contains(body, []byte(`"transactions"`)) || !actionTarget(a, id) {
		return nil
	}
	segs := pathSegments(a.URL, a.Key)
	var v struct {
		Transactions []map[string]any `json:"transactions"`
	}
	dec := json.NewDecoder(bytes.NewReader(trimBOM(body)))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	ours := actionTransaction(segs[len(segs)-1], a.RequestBody)
	last := -1
	for i, t := range v.Transactions {
		if ours(t) {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	if status, refused := transactionRefused(v.Transactions[last]); refused {
		return fmt.Errorf("%w: the last %q transaction like ours is %q, and it may be an earlier request's, ours not listed yet",
			errUndecodable, truncate(segs[len(segs)-1], 64), truncate(status, 64))
	}
	return nil
}

// actionTarget reports whether id is the resource a's request acted on:
// a segment of the request's path (pathSegments) with an operation's
// segment after it (POST /payments/{id}/refund), not a resource updated
// or made at its own path.
func actionTarget(a *Answer, id string) bool {
	segs := pathSegments(a.URL, a.Key)
	return id != "" && len(segs) > 0 && slices.Contains(segs[:len(segs)-1], id)
}

// actionDoneWords are, for an action on a payment (its path's last
// segment, singular, folded), the statuses of that payment which say the
// action was done to it. Any other status of it is the payment's own
// (Authorized, Captured to a refund), whether or not the action reached
// it.
var actionDoneWords = map[string][]string{
	"capture":      {"captured", "settled", "paid", "succeeded", "completed"},
	"refund":       {"refunded"},
	"void":         {"voided", "canceled", "cancelled"},
	"cancel":       {"canceled", "cancelled", "voided"},
	"cancellation": {"canceled", "cancelled", "voided"},
	"reversal":     {"reversed", "canceled", "cancelled", "voided"},
}

// actionOf is a's request's action: its path's last segment, folded,
// without a plural's "s" ("captures" is "capture").
func actionOf(a *Answer) string {
	segs := pathSegments(a.URL, a.Key)
	if len(segs) == 0 {
		return ""
	}
	return strings.TrimSuffix(folded(segs[len(segs)-1]), "s")
}

// actionShown reports whether st, the status of the resource named id
// in body, an answer to a's request, may be read as that request's
// outcome: it is not the payment a capture, refund or void acted on
// (actionTarget, actionDoneWords), or its status says the action was
// done to it and, to a capture, its "captured" is not false (Stripe's
// Charge "succeeded" once authorised, "captured": false until captured).
func actionShown(a *Answer, body []byte, id string, st jsonString) bool {
	action := actionOf(a)
	done, ok := actionDoneWords[action]
	if !ok || !actionTarget(a, id) {
		return true
	}
	if action == "capture" && uncaptured(body) {
		return false
	}
	return st.ok && slices.Contains(done, folded(st.s))
}

// uncaptured reports whether body's "captured" is false (the JSON
// literal).
func uncaptured(body []byte) bool {
	var v struct {
		Captured *bool `json:"captured"`
	}
	return json.Unmarshal(body, &v) == nil && v.Captured != nil && !*v.Captured
}

// actionTransaction is whether a transaction may be the one a request
// doing action (a path's last segment, "refund") with body added: its
// "transactionType" or else "type" names the action, in either case,
// singular or plural, and its "amount" is not surely other than the
// body's.
func actionTransaction(action string, body []byte) func(map[string]any) bool {
	var req map[string]any
	dec := json.NewDecoder(bytes.NewReader(trimBOM(body)))
	dec.UseNumber()
	_ = dec.Decode(&req)
	asked, hasAmount := scalarOf(req["amount"])
	action = folded(action)
	return func(t map[string]any) bool {
		kind, ok := scalarOf(t["transactionType"])
		if !ok {
			kind, _ = scalarOf(t["type"])
		}
		if kind = folded(kind); kind == "" || (kind != action && kind+"s" != action) {
			return false
		}
		amount, ok := scalarOf(t["amount"])
		return !ok || !hasAmount || !differ(asked, amount)
	}
}

// transactionRefused is a transaction's "processorStatus", else its
// "status", and whether it says the transaction was refused.
func transactionRefused(t map[string]any) (string, bool) {
	for _, name := range [...]string{"processorStatus", "status"} {
		if s, ok := t[name].(string); ok && s != "" {
			return s, resourceStatusOf(s) == statusFailed
		}
	}
	return "", false
}

// resourceStatus is what a resource's "status" says of its creation.
type resourceStatus int

const (
	statusOther  resourceStatus = iota // taken as created
	statusFailed                       // the server refused it: failed, never resent
	statusError                        // an error of the call's, not an outcome: proves nothing
	// statusDone: the work is done, even in a 202 (Checkout.com replays
	// a processed payment with 202 and the first answer's body).
	statusDone
	// statusRunning: the operation asked for has not finished, even in a
	// 200 or 201: a long-running operation's status monitor, polled with
	// 200 OK while it runs (the Azure REST API Guidelines' "NotStarted"
	// and "Running", ARM's "InProgress"), or a refusal under way. Not a
	// created resource's own state (a payment "pending"), which
	// DecodeJSON takes as created.
	statusRunning
)

// resourceStatusOf reads a resource's status word.
func resourceStatusOf(s string) resourceStatus {
	// Spaces around the word are no part of it: " RJCT" read as another
	// word would be a rejected payment taken as made.
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "failed", "declined", "rejected", "refused", "denied", "soft_declined",
		// Shopify's transaction and PayU's payment say "failure" (beside
		// "success", "pending", "error"): read as another word, a failed
		// payment was taken as made.
		"failure",
		// A Pix refund's final status when it was not made (BACEN's API
		// Pix, Devolucao.status: EM_PROCESSAMENTO, DEVOLVIDO,
		// NAO_REALIZADO): read as made, the customer is never refunded.
		"nao_realizado",
		// ISO 20022's rejected (pain.002 RJCT), which open banking APIs
		// put in "status" (Bridge's payment requests): read as created,
		// a payment no one made read as paid.
		"rjct",
		// Cybersource's 201 for a payment Decision Manager rejected after
		// the issuer approved it (its authorisation reversed), and for one
		// it could not process: read as created, an order no one paid for
		// was shipped. Its AUTHORIZED_PENDING_REVIEW stays created.
		"authorized_risk_declined", "invalid_request":
		return statusFailed
	case "error", "errored":
		return statusError
	case "authorized", "authorised", "captured", "paid", "succeeded", "completed", "approved", "settled", "card verified",
		// ISO 20022's settlement completed, on the debtor's account
		// (ACSC) or the creditor's (ACCC): the payment was made.
		"acsc", "accc":
		return statusDone
	case "notstarted", "running", "inprogress", "declining", "failing",
		"authentication_verified", "authorisation_started", "authorisation_passed", "completing",
		// The server made the payment and does not know yet how it
		// ended (Mastercard Send's, TabaPay's and Xendit's "UNKNOWN":
		// "do not resubmit", look it up later): not yet an outcome.
		"unknown":
		// Revolut's payment "declining" or "failing" is a refusal under
		// way, not a payment made: processing until it says which. So
		// is one the server is still authorising or completing (Revolut
		// Merchant's states before "authorised" and "completed"): the
		// issuer may yet decline it. Not "authentication_challenge",
		// which waits for the customer, not the server: asked again, it
		// would stay so until Revolut gives up, the customer never shown
		// the challenge its body carries.
		return statusRunning
	}
	return statusOther
}

// resultBody is what DecodeJSON reads from a body: its members below,
// each with ok set when it is a JSON string (state: present and not
// null; resourceId and reason, which are strings or absent: not empty;
// id: a positive integer too, as its digits). The others may hold any
// JSON value.
type resultBody [memMembers]jsonString

// The members of resultBody.
const (
	memState = iota
	memResourceID
	memID
	memReason
	memKey
	memIdemKey
	memIdemKey2
	memStatus // a plain resource's own status
	// memError and memErrors are ok when the member holds an error: any
	// value but null, false, 0, "", [] and {}.
	memError
	memErrors
	memJSONRPC // "jsonrpc": the "id" is a call's, not a resource's
	// memUnsuccessful is ok when "success" is false (the JSON literal).
	memUnsuccessful
	// memStatusCode is a "status_code" string, or a number's digits: an
	// API's own status in its 200 reply (Midtrans's "406").
	memStatusCode
	memMembers // how many
)

// plainMember reports whether member m is a string field of
// unmarshalResult's struct: null leaves it as it is, and "" is no value.
func plainMember(m int) bool { return m == memResourceID || m == memReason }

// errorMember reports whether member m is one that says the answer is an
// error (memError, memErrors): scanResult reads only null in them.
func errorMember(m int) bool { return m == memError || m == memErrors }

// jsonString is a member's value when it is a string (ok).
type jsonString struct {
	s  string
	ok bool
}

// unmarshalResult reads a body with encoding/json: the definition of
// DecodeJSON's reading, which scanResult follows.
func unmarshalResult(body []byte) (resultBody, error) {
	var v struct {
		State      json.RawMessage `json:"state"`
		ResourceID string          `json:"resourceId"`
		ID         json.RawMessage `json:"id"`
		Reason     string          `json:"reason"`
		Key        any             `json:"key"`
		IdemKey    any             `json:"idempotencyKey"`
		IdemKey2   any             `json:"idempotency_key"`
		Error      any             `json:"error"`
		Errors     any             `json:"errors"`
		Status     any             `json:"status"`
		JSONRPC    any             `json:"jsonrpc"`
		Success    any             `json:"success"`
		StatusCode json.RawMessage `json:"status_code"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return resultBody{}, err
	}
	r := resultBody{memResourceID: {v.ResourceID, v.ResourceID != ""}, memReason: {v.Reason, v.Reason != ""},
		memID: idOf(v.ID), memKey: anyString(v.Key), memIdemKey: anyString(v.IdemKey), memIdemKey2: anyString(v.IdemKey2), memStatus: anyString(v.Status), memJSONRPC: anyString(v.JSONRPC),
		memError: {ok: holdsError(v.Error)}, memErrors: {ok: holdsError(v.Errors)}, memUnsuccessful: {ok: v.Success == false},
		memStatusCode: codeOf(v.StatusCode)}
	if len(v.State) > 0 && !stateReference(v.State) {
		var state *string
		if err := json.Unmarshal(v.State, &state); err != nil {
			return resultBody{}, fmt.Errorf("its \"state\" is no word: %w", err)
		}
		if state != nil {
			r[memState] = jsonString{*state, true}
		}
	}
	return r, nil
}

// stateReference reports whether a "state" member is a commercetools
// Reference to a State of the project's own workflow, {"typeId":"state",
// "id":…} (an Order created with OrderFromCartDraft's "state"): a link
// to another resource, no status, so the resource reads as if it had
// no "state". Any other object there may hold a status in a shape of
// its own ({"status":"declined"}), and still proves nothing.
func stateReference(raw json.RawMessage) bool {
	var ref struct {
		TypeID string `json:"typeId"`
		ID     string `json:"id"`
	}
	return len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &ref) == nil && ref.TypeID == "state" && ref.ID != ""
}

// codeOf is a "status_code" member, raw: a string, or a number as it is
// written.
func codeOf(raw json.RawMessage) jsonString {
	var s string
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if json.Unmarshal(raw, &s) == nil {
			return jsonString{s, true}
		}
	case len(raw) > 0 && (raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9'):
		return jsonString{string(raw), true}
	}
	return jsonString{}
}

// idOf is a resource's "id" member, raw: a string, or a positive integer
// as its digits (no float in between: ids pass 2^53).
func idOf(raw json.RawMessage) jsonString {
	var s string
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if json.Unmarshal(raw, &s) == nil {
			return jsonString{s, true}
		}
	case positiveInteger(raw):
		return jsonString{string(raw), true}
	}
	return jsonString{}
}

// positiveInteger reports whether b is a JSON number with no sign,
// fraction or exponent, and not 0: the only numbers taken for an id.
func positiveInteger(b []byte) bool {
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return false
	}
	return skipDigits(b, 1) == len(b)
}

func anyString(v any) jsonString {
	s, ok := v.(string)
	return jsonString{s, ok}
}

// holdsError reports whether an "error" or "errors" member's value says
// there was one: some APIs send "error": null or "errors": [] on success.
func holdsError(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// Verdict is what a response status means for an operation; see the outcome
// table in the package documentation.
type Verdict int

// The verdicts, one per row of the outcome table.
const (
	// Settled: decode the body; it settles the operation (or says it is
	// processing). An undecodable body is treated as Ambiguous.
	Settled Verdict = iota + 1
	// Processing: the server holds the key in flight; wait, then query.
	Processing
	// Conflict: the key was used with another payload; failed, never resent.
	Conflict
	// Throttled: not executed; wait max(backoff, Retry-After) and resend.
	Throttled
	// Ambiguous: it may or may not have executed; query, then resend with
	// the same key.
	Ambiguous
	// Rejected: the server refused it; failed with the server's reason.
	Rejected
)

// A Classifier maps a submit's status code to a Verdict. Wrap
// DefaultClassifier to change one row, e.g. to make 402 explicit.
type Classifier func(statusCode int) Verdict

// DefaultClassifier implements the outcome table: 2xx settled; 409
// processing; 422 conflict; 429 and 503 throttled; 408, 499, 3xx and
// other 5xx ambiguous; any other 4xx rejected.
//
// A Conflict is a key conflict (ErrKeyConflict) only when the status was
// named with WithKeyConflictStatus or the body is about the idempotency
// key: it mentions it ("idempot…", as the IETF draft's and common
// middlewares' messages do) or names the header the key is sent in
// (WithKeyHeader; PayPal's PAYPAL_REQUEST_ID_PREVIOUSLY_USED names
// PayPal-Request-Id) or, with WithKeyInBody, the body member that holds
// it (Airwallex's request_id: "The same request ID has already been
// used"). A 422 from a handler's own validation is a plain
// rejection (ErrFailed). A Rejected 400 is a key conflict when its body
// is about the key (as above) and says it was used before or with other
// parameters (Stripe's idempotency_error, Square's IDEMPOTENCY_KEY_REUSED,
// PayPal's DUPLICATE_REQUEST_ID), not when it says the key is missing.
// A Processing 409 is a key conflict, as a 422 is, when its body is about
// the key and says the key's request differs from this one (PayFacto's
// IDEMPOTENCY_KEY_REUSED, Increase's idempotency_key_already_used_error,
// emergepay's "conflicting payload"),
// unless it also says a request is still running ("in progress", "in
// use", "processing"…): that is the key in flight. A Processing 409 that
// refuses the object's state or the request's values, whoever sends it,
// is Rejected, a plain refusal (failed to a first attempt, left for a
// person after a send that may have executed): commercetools'
// ConcurrentModification, and Increase's invalid_operation_error,
// Klarna's BAD_VALUE and Affirm's refusals of a capture's amount
// (capture-greater-instrument, capture-unequal-instrument,
// partial-capture-instrument) unless their words say something is still
// running.
// A Conflict, or a Rejected 400, whose body is about the key or says
// "request already" or "previous request", and says a request is still
// running ("in progress", "being processed"…; Adyen's 422 errorCode 704,
// "request already processed or in progress", PayPal's 422
// PREVIOUS_REQUEST_IN_PROGRESS) is the key in flight too, as a 409:
// never failed.
// A Rejected 400 that carries an AWS throttling error code
// (ThrottlingException, Throttling, TooManyRequestsException…, in its
// body or its X-Amzn-ErrorType header) is Throttled, as a 429; one whose
// code is DynamoDB's TransactionInProgressException is the key in
// flight, as above.
// Answers marked replayed (Idempotent-Replayed: true), and a refusal
// that names the resource its key already created (GoCardless's 409
// idempotent_creation_conflict, Primer's IdempotencyKeyAlreadyExists,
// Banking Circle's "IdempotencyKey … was already used", Moov's 409
// carrying the key's transfer),
// are judged before the classifier: see the package documentation.
func DefaultClassifier(statusCode int) Verdict {
	switch {
	case statusCode >= 200 && statusCode < 300:
		return Settled
	case statusCode == http.StatusConflict:
		return Processing
	case statusCode == http.StatusUnprocessableEntity:
		return Conflict
	case statusCode == http.StatusTooManyRequests, statusCode == http.StatusServiceUnavailable:
		return Throttled
	case statusCode == http.StatusRequestTimeout, statusCode == statusCancelled:
		return Ambiguous
	case statusCode >= 400 && statusCode < 500:
		return Rejected
	default:
		// 3xx (a 303 may follow a completed create), 5xx and anything odd:
		// the operation may have executed.
		return Ambiguous
	}
}

// statusCancelled is 499, google.rpc.Code's CANCELLED over HTTP (and
// Connect's "canceled", and nginx's "client closed request"): the
// operation was stopped, possibly after it had done its work, as a
// handler's call made after its commit is cancelled. It says nothing of
// whether it executed, unlike the other 4xx.
const statusCancelled = 499

// errorReason pulls a human reason out of an error body, falling back to
// the status text; bounded so a hostile body cannot bloat the journal.
// It reads "reason", "message" and "error" (a string, or an object's
// "message"), then the shapes that say it otherwise: RFC 9457's "detail"
// and "title", exchanges' "msg", Plaid's "error_message", an "errors"
// list's first "detail" or "message" (Square, GraphQL) or an "errors"
// string, Mastercard's {"Errors":{"Error":…}} (one error, or a list's
// first) "ReasonCode" with its "Description", and Checkout.com's "error_type" with its
// "error_codes"; then Telegram's "description", "errorMessage". An
// OAuth error's code goes with its "error_description" (RFC 6749 5.2:
// "invalid_client: …"), and a top-level "code" that names the error with
// its "message" (Toss's {"code":"NOT_FOUND_PAYMENT","message":…}): the
// code is what a person looks up. Members of other types are passed
// over, not a reason to read none.
func errorReason(statusCode int, body []byte) string {
	var v struct {
		Reason       any `json:"reason"`
		Error        any `json:"error"`
		Message      any `json:"message"`
		Detail       any `json:"detail"`
		Title        any `json:"title"`
		Msg          any `json:"msg"`           // exchanges' (Binance's, OKX's, KuCoin's) {"code":…,"msg":…}
		ErrorMessage any `json:"error_message"` // Plaid's, beside its "error_type" category
		Errors       any `json:"errors"`
		ErrorType    any `json:"error_type"`
		ErrorCodes   any `json:"error_codes"`
		Description  any `json:"description"`       // Telegram's {"ok":false,"error_code":400,"description":…}
		ErrorDesc    any `json:"error_description"` // OAuth's, beside its "error" code
		ErrorMsg     any `json:"errorMessage"`
		Code         any `json:"code"`
		ErrorCode    any `json:"error_code"`     // Klarna's, beside its error_messages
		ErrorMsgs    any `json:"error_messages"` // Klarna's: a list of words
	}
	reason := ""
	if json.Unmarshal(trimBOM(body), &v) == nil {
		// Maxio's (Chargify's) "errors" is a list of sentences.
		reason = firstString(v.Reason, v.Message, v.Error, memberOf(v.Error, "message"), v.Detail, v.Title, v.Msg, v.ErrorMessage, v.Errors,
			memberOf(firstOf(v.Errors), "detail"), memberOf(firstOf(v.Errors), "message"), firstOf(v.Errors), v.Description, v.ErrorMsg)
		if desc := firstString(v.ErrorDesc); desc != "" && reason == firstString(v.Error) {
			// OAuth's "error" is a code ("invalid_client"); the words
			// are its description's.
			reason = joinCode(reason, desc)
		} else if code := firstString(v.Code); reason != "" && reason == firstString(v.Message) && namesError(code) {
			reason = joinCode(code, reason)
		}
		if reason == "" {
			// Mastercard's APIs (Send's 402 DECLINE among them) put their
			// errors under "Errors"."Error", a list or a lone object: the
			// code a caller acts on and the words a person reads.
			e := memberOf(v.Errors, "Error")
			if first := firstOf(e); first != nil {
				e = first
			}
			code, _ := memberOf(e, "ReasonCode").(string)
			reason = joinCode(code, firstString(memberOf(e, "Description")))
		}
		if reason == "" {
			// Klarna's {"error_code":"BAD_VALUE","error_messages":[…],
			// "correlation_id":…}: the code a caller acts on, and the
			// first of its words.
			code, _ := v.ErrorCode.(string)
			reason = joinCode(code, firstString(firstOf(v.ErrorMsgs)))
		}
		if reason == "" {
			if typ, _ := v.ErrorType.(string); typ != "" {
				reason = typ
				if code, _ := firstOf(v.ErrorCodes).(string); code != "" {
					reason += ": " + code
				}
			}
		}
	}
	if reason == "" {
		reason = http.StatusText(statusCode)
	}
	return fmt.Sprintf("%d: %s", statusCode, truncate(reason, 512))
}

// joinCode is an error's code and its words, or either alone.
func joinCode(code, words string) string {
	switch {
	case code == "":
		return words
	case words == "":
		return code
	}
	return code + ": " + words
}

// namesError reports whether code, a top-level "code" string, names an
// error with letters ("NOT_FOUND_PAYMENT"), not a number or a success word:
// an exchange's "0" or "200000" beside a message says nothing more.
func namesError(code string) bool {
	if code == "" || len(code) > 64 {
		return false
	}
	switch strings.ToLower(code) {
	case "ok", "success", "succeeded":
		return false
	}
	return strings.ContainsFunc(code, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' })
}

// firstString is the first of vs that is a non-empty string.
func firstString(vs ...any) string {
	for _, v := range vs {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// memberOf is v's member name when v is a JSON object.
func memberOf(v any, name string) any {
	if m, ok := v.(map[string]any); ok {
		return m[name]
	}
	return nil
}

// firstOf is v's first element when v is a JSON array.
func firstOf(v any) any {
	if a, ok := v.([]any); ok && len(a) > 0 {
		return a[0]
	}
	return nil
}
