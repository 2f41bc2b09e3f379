package fakeserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Behavior is how the server answers a key it has seen: which kind of
// real Idempotency-Key middleware it models, or, with [Behavior.KeyMember],
// which order API whose key is a client order id in the body. A behaviour
// is a set of knobs, which combine; the presets ([IETFDraft],
// [StoredErrors], [NoBodyCompare], [Conflict417], [ShortWindow],
// [ClientOrderID], listed by [Behaviors], and [KeyIgnored]) each turn one knob, and their Name is the word used by the command's
// -behavior flag and by GET /_behavior. The zero value is the IETF draft.
//
// A behaviour is the server's nature, not a fault: it holds for the
// server's life, across [Server.Reset] and whatever faults are on.
type Behavior struct {
	// Name labels the behaviour in tables and in GET /_behavior; the
	// presets set it to their name. "" reads as the knobs' description
	// (see [Behavior.String]).
	Name string

	// StoreErrors makes the handler's server errors the key's stored
	// answer, as middlewares that cache any response do: the faults
	// error-after-commit, error-before-commit and unavailable (503) then
	// match only a submit that executes (a new key), and every later
	// request with the key gets the same status and body with
	// "Idempotent-Replayed: true" for the life of the key.
	// (error-after-commit still performed the side effect; the result
	// endpoint reports it. The others performed nothing; the result
	// endpoint answers 404.) The throttle fault (429), a rate limiter in
	// front of the middleware, is never stored.
	StoreErrors bool

	// NoBodyCompare replays a used key's stored answer to any request with
	// that key, whatever its method, path or body, instead of refusing a
	// different request: the silent replay of middlewares that do not
	// fingerprint requests.
	NoBodyCompare bool

	// ConflictStatus is the status of the answer to a different request
	// with a used key (default 422, as in the IETF draft); a 4xx.
	ConflictStatus int

	// Retention is the key window (see [Config.Retention]); 0 leaves it to
	// Config.Retention. Setting both to different values is an error.
	Retention time.Duration

	// KeyMember, when set, makes the server an order API whose key is a
	// client order id: the string value of the request body's top-level
	// JSON member of this name (Alpaca's client_order_id, Binance's
	// newClientOrderId, KuCoin's clientOid). The key header is not read,
	// as such APIs ignore a header they do not document; a body without
	// the member gets 400 -1102. Such an API never replays: a repeated id
	// whose order exists, whatever the body, is refused with Binance's
	// 400 {"code":-2010,"msg":"Duplicate order sent."}, and an order
	// never placed (declined, rejected) leaves the id free. Answers take
	// Binance's spot shapes (developers.binance.com, Spot API, "Trading
	// endpoints" and "Error codes"): an order is 200 {"symbol","orderId",
	// "orderListId","clientOrderId","status"}, status "NEW" while it rests
	// (slow-processing) and "FILLED" once done; the result endpoint
	// answers that order by client order id, or 400 {"code":-2013,"msg":
	// "Order does not exist."}. A decline is 400 -2010 "Account has
	// insufficient balance for requested action.", a reject-409 400 -2010
	// "Order would immediately match and take." (Binance refuses every
	// order with 400, never 409); the other faults keep their answers. StoreErrors, NoBodyCompare and ConflictStatus
	// describe a replaying middleware and cannot be combined with it.
	KeyMember string

	// OpenOnly, with KeyMember, holds a client order id only while its
	// order is open (in flight, or resting under slow-processing): once
	// filled, the id is free and a repeat places a second order, as
	// Binance's newClientOrderId, "a unique id among open orders", and
	// KuCoin's clientOid are. No preset turns it on: with the query-lag
	// fault it models Binance's GET /api/v3/order answering -2013 for an
	// order it has placed (Mike-Mercer/Binance-REST-Test measured up to a
	// minute; dev.binance.vision "FAQ: Error message 'Order does not
	// exist'"), against which a client's resend after a not-found
	// answer places the order twice.
	OpenOnly bool

	// KeyIgnored makes the server an endpoint that does not de-duplicate
	// by the key: every submit with a valid key executes (a new order,
	// counted in the key's KeyStats.Effects), and the endpoint's answers
	// say so with "Idempotency-Status: ignored", as Solidgate's endpoints
	// without idempotency support do ("Idempotency support varies by
	// endpoint. Send the request with an Idempotency-Key header and check
	// the Idempotency-Status value. A value of ignored means the endpoint
	// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests).
	// The mark is the handler's: on the answers of a submit that executed
	// (error-after-commit's 500, garbage and truncated bodies included),
	// not on those of the faults that answer instead of the handler
	// (error-before-commit, throttle, unavailable: a proxy's or a rate
	// limiter's in front of it, modelled), which tell a client nothing.
	// The result endpoint answers by the key the key's last order, as
	// Solidgate's order status by the merchant's order_id tells of the
	// order's last payment only
	// (https://docs.solidgate.com/payments/payments-insights/payments-types-and-statuses/,
	// modelled): a resend that executes hides the order before it. It
	// takes no StoreErrors, NoBodyCompare, ConflictStatus or KeyMember,
	// which describe a server that de-duplicates.
	KeyIgnored bool
}

// The names of the presets.
const (
	nameIETFDraft     = "ietf-draft"
	nameStoredErrors  = "stored-errors"
	nameNoBodyCompare = "no-body-compare"
	nameConflict417   = "conflict-417"
	nameShortWindow   = "short-window"
	nameClientOrderID = "client-order-id"
	nameKeyIgnored    = "key-ignored"
)

// ShortWindowRetention is the key window of the [ShortWindow] preset: the
// default Lifetime of the Fiber framework's idempotency middleware
// (https://docs.gofiber.io/api/middleware/idempotency/, "Lifetime ...
// Default 30 * time.Minute").
const ShortWindowRetention = 30 * time.Minute

// IETFDraft is the behaviour of the IETF draft
// (draft-ietf-httpapi-idempotency-key-header): 400 without a key, 409 while
// a request with the key is in flight, 422 for the key with a different
// request; the stored result (201, 402, 202) is replayed, server errors
// are not stored. It is the zero Behavior, named.
func IETFDraft() Behavior { return Behavior{Name: nameIETFDraft} }

// StoredErrors is IETFDraft with [Behavior.StoreErrors]: a stored 500 or
// 503 is replayed, marked replayed, for the life of the key.
func StoredErrors() Behavior { return Behavior{Name: nameStoredErrors, StoreErrors: true} }

// NoBodyCompare is IETFDraft with [Behavior.NoBodyCompare]: a used key
// gets its stored answer, marked replayed, whatever the request.
func NoBodyCompare() Behavior { return Behavior{Name: nameNoBodyCompare, NoBodyCompare: true} }

// Conflict417 is IETFDraft answering 417 Expectation Failed, instead of
// 422, to a used key with a different request.
func Conflict417() Behavior {
	return Behavior{Name: nameConflict417, ConflictStatus: http.StatusExpectationFailed}
}

// ShortWindow is IETFDraft with a key window of [ShortWindowRetention]
// (30 minutes), after which a key executes again.
func ShortWindow() Behavior { return Behavior{Name: nameShortWindow, Retention: ShortWindowRetention} }

// ClientOrderIDMember is the body member that holds the key under the
// [ClientOrderID] preset: Alpaca's name (docs.alpaca.markets, "Create an
// Order", client_order_id), which JSON order APIs share.
const ClientOrderIDMember = "client_order_id"

// ClientOrderID is an order API whose key is the client order id in the
// body's [ClientOrderIDMember]: repeats refused with Binance's -2010, never
// replayed; the result endpoint answers the order or -2013 (see
// [Behavior.KeyMember]). The id is held for the key window (24h by
// default), as Alpaca holds client_order_id unique: an exchange that frees
// it once the order fills is harsher, and is what the client's query
// before any resend is for ([Behavior.OpenOnly] models it).
func ClientOrderID() Behavior {
	return Behavior{Name: nameClientOrderID, KeyMember: ClientOrderIDMember}
}

// KeyIgnored is an endpoint that ignores the key: every submit executes,
// every answer of its handler carries "Idempotency-Status: ignored", and
// the result endpoint answers the key's last order (see
// [Behavior.KeyIgnored]). It is not one of [Behaviors]: a client can only
// flag, never prevent, a second order there (a resend net/http makes on
// its own before anything said the endpoint ignores the key, say), which
// a test of one order per key cannot hold it to.
func KeyIgnored() Behavior { return Behavior{Name: nameKeyIgnored, KeyIgnored: true} }

// Behaviors returns the presets, in a fixed order: IETFDraft first. Not
// [KeyIgnored], whose server de-duplicates nothing.
func Behaviors() []Behavior {
	return []Behavior{IETFDraft(), StoredErrors(), NoBodyCompare(), Conflict417(), ShortWindow(), ClientOrderID()}
}

// BehaviorNamed returns the preset of [Behaviors] called name, or an
// error listing the names.
func BehaviorNamed(name string) (Behavior, error) {
	var names []string
	for _, b := range Behaviors() {
		if b.Name == name {
			return b, nil
		}
		names = append(names, b.Name)
	}
	return Behavior{}, fmt.Errorf("unknown behavior %q (want one of: %s)", name, strings.Join(names, ", "))
}

// Description returns a one-line description of the behaviour: how it
// differs from the IETF draft.
func (b Behavior) Description() string {
	if b.KeyIgnored {
		d := "an endpoint that ignores the key: every submit executes, answers carry Idempotency-Status: ignored; the result endpoint answers the key's last order"
		if b.Retention != 0 {
			d += "; orders found by key for " + b.Retention.String()
		}
		return d
	}
	if b.KeyMember != "" {
		d := fmt.Sprintf("an order API: the key is the body's %q; a repeated id is refused 400 -2010 \"Duplicate order sent.\", never replayed; the result endpoint answers the order or 400 -2013 (Binance's shapes)", b.KeyMember)
		if b.OpenOnly {
			d += "; an id is free again once its order has filled"
		}
		if b.Retention != 0 {
			d += "; ids held " + b.Retention.String()
		}
		return d
	}
	var diffs []string
	if b.StoreErrors {
		diffs = append(diffs, "the handler's 500 and 503 are stored and replayed for the key's life")
	}
	if b.NoBodyCompare {
		diffs = append(diffs, "a used key replays its answer to any request, whatever the body (silent replay)")
	}
	if s := b.conflictStatus(); s != http.StatusUnprocessableEntity {
		diffs = append(diffs, fmt.Sprintf("%d, not 422, for a used key with another request", s))
	}
	if b.Retention != 0 {
		diffs = append(diffs, "keys kept "+b.Retention.String())
	}
	if len(diffs) == 0 {
		return "400 without a key, 409 in flight, 422 for a used key with another request; server errors not stored"
	}
	return "as " + nameIETFDraft + ", but " + strings.Join(diffs, "; ")
}

// String returns b.Name, or if it is "" the knobs that differ from the
// IETF draft, joined by "+" ("store-errors+conflict-417"), or "ietf-draft"
// when none does.
func (b Behavior) String() string {
	if b.Name != "" {
		return b.Name
	}
	var knobs []string
	if b.StoreErrors {
		knobs = append(knobs, "store-errors")
	}
	if b.NoBodyCompare {
		knobs = append(knobs, "no-body-compare")
	}
	if b.ConflictStatus != 0 && b.ConflictStatus != http.StatusUnprocessableEntity {
		knobs = append(knobs, fmt.Sprintf("conflict-%d", b.ConflictStatus))
	}
	if b.Retention != 0 {
		knobs = append(knobs, "retention-"+b.Retention.String())
	}
	if b.KeyMember != "" {
		knobs = append(knobs, "key-member-"+b.KeyMember)
	}
	if b.OpenOnly {
		knobs = append(knobs, "open-only")
	}
	if b.KeyIgnored {
		knobs = append(knobs, "key-ignored")
	}
	if len(knobs) == 0 {
		return nameIETFDraft
	}
	return strings.Join(knobs, "+")
}

// conflictStatus returns the status of a key reused with another request.
func (b Behavior) conflictStatus() int {
	if b.ConflictStatus == 0 {
		return http.StatusUnprocessableEntity
	}
	return b.ConflictStatus
}

// validate returns why b cannot be used, or nil. Its messages say what to
// change.
func (b Behavior) validate() error {
	if s := b.ConflictStatus; s != 0 && (s < 400 || s > 499) {
		return fmt.Errorf("conflict status %d is not a 4xx (want a client error such as 422, 409 or 417, or 0 for 422)", s)
	}
	if b.Retention < 0 {
		return fmt.Errorf("retention %v is negative (want a positive duration, or 0 for Config.Retention)", b.Retention)
	}
	if b.OpenOnly && b.KeyMember == "" {
		return fmt.Errorf("open-only frees a client order id once its order fills: it needs a key member (set KeyMember)")
	}
	if b.KeyMember != "" && (b.StoreErrors || b.NoBodyCompare || b.ConflictStatus != 0) {
		return fmt.Errorf("key member %q is an order API that never replays: it takes no store-errors, no-body-compare or conflict status (leave them unset)", b.KeyMember)
	}
	if b.KeyIgnored && (b.StoreErrors || b.NoBodyCompare || b.ConflictStatus != 0 || b.KeyMember != "") {
		return fmt.Errorf("key-ignored executes every submit: it takes no store-errors, no-body-compare, conflict status or key member, which de-duplicate (leave them unset)")
	}
	return nil
}

type behaviorJSON struct {
	Name           string `json:"name"`
	StoreErrors    bool   `json:"store_errors"`
	NoBodyCompare  bool   `json:"no_body_compare"`
	ConflictStatus int    `json:"conflict_status"`
	Retention      string `json:"retention"`
	KeyMember      string `json:"key_member,omitempty"`
	OpenOnly       bool   `json:"open_only,omitempty"`
	KeyIgnored     bool   `json:"key_ignored,omitempty"`
}

// marshalBehavior encodes the behaviour a server runs with, defaults
// filled in, for GET /_behavior.
func marshalBehavior(b Behavior, retention time.Duration) []byte {
	body, _ := json.Marshal(behaviorJSON{
		Name:           b.String(),
		StoreErrors:    b.StoreErrors,
		NoBodyCompare:  b.NoBodyCompare,
		ConflictStatus: b.conflictStatus(),
		Retention:      retention.String(),
		KeyMember:      b.KeyMember,
		OpenOnly:       b.OpenOnly,
		KeyIgnored:     b.KeyIgnored,
	})
	return body
}
