package idemtest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemkit/idem/internal/fakeserver"
)

// FaultKind names a fault. Its string form is the constant's name in kebab
// case (DelayResponse is "delay-response"): the same word is the kind in
// POST /_faults, the rate flag of cmd/idem-fakeserver and the fault flag of
// examples/orders.
type FaultKind string

// Description returns a one-line description of the fault, or "" for an
// unknown kind.
func (k FaultKind) Description() string { return fakeserver.FaultKind(k).Description() }

// The faults. As submit faults, [ErrorBeforeCommit], [Throttle] and
// [Unavailable] match any submit with a valid key; [Decline], [Reject409],
// [SlowProcessing], [QueryLag], [Preempt], [StillRunning] (and its
// variants) and [LostAnswerLag] only a submit that executes (a new key);
// the others a submit that executes or replays, not one that gets
// 409, 422 or 503. Under [StoredErrors], [ErrorAfterCommit],
// [ErrorBeforeCommit] and [Unavailable] match only a submit that executes,
// and their answer is stored as the key's.
const (
	// DropAfterCommit commits and performs the side effect, then closes the
	// connection with no response.
	DropAfterCommit FaultKind = "drop-after-commit"
	// DelayResponse commits and performs the side effect, then answers after
	// Fault.Delay, unless the client gives up first (logged with Status
	// 0); repeats get 409 meanwhile.
	DelayResponse FaultKind = "delay-response"
	// ErrorAfterCommit commits and performs the side effect, then answers
	// 500; a replay returns the stored result (under StoredErrors, the
	// 500).
	ErrorAfterCommit FaultKind = "error-after-commit"
	// ErrorBeforeCommit answers 500 and records nothing (under
	// StoredErrors, it stores the 500, with no side effect).
	ErrorBeforeCommit FaultKind = "error-before-commit"
	// Throttle answers 429 with Retry-After and records nothing.
	Throttle FaultKind = "throttle"
	// Unavailable answers 503 with Retry-After and records nothing (under
	// StoredErrors, it stores the 503, with no side effect).
	Unavailable FaultKind = "unavailable"
	// QueryLag commits, but the result endpoint answers 404 until
	// Fault.Delay has passed since the commit.
	QueryLag FaultKind = "query-lag"
	// SlowProcessing commits, performs the side effect and answers 202
	// processing; the operation is processing until Fault.Delay has passed,
	// then succeeded. Repeats get 409 meanwhile. Its webhook events
	// ([WithWebhook]): processing at once, succeeded once the delay has
	// passed by the server's clock.
	SlowProcessing FaultKind = "slow-processing"
	// GarbageBody commits and performs the side effect, then answers 201
	// with a body that is not JSON.
	GarbageBody FaultKind = "garbage-body"
	// TruncatedBody commits and performs the side effect, then answers 201
	// with a truncated JSON body and closes the connection.
	TruncatedBody FaultKind = "truncated-body"
	// Decline commits a failed result (402, "card declined") with no side
	// effect; replays and queries return failed.
	Decline FaultKind = "decline"
	// Reject409 is the handler refusing with 409: a failed result with no
	// side effect, stored; replays answer the stored 409, queries failed.
	Reject409 FaultKind = "reject-409"
	// Preempt makes someone else use the key first, processing for
	// Fault.Delay: this submit gets 409 meanwhile, then the answer to a
	// used key with another request (422, 417 under Conflict417, a silent
	// replay of the other's 201 under NoBodyCompare). See Server.Preempt.
	Preempt FaultKind = "preempt"
	// StillRunning is a request still running when its resend or the
	// result query arrives: it commits (its side effect counted when it
	// arrives) only once Fault.Delay has passed by the server's clock,
	// whether or not its client waits for it.
	// Meanwhile any submit with the key gets Stripe's 409
	// idempotency_key_in_use, with no Retry-After, and the result endpoint
	// answers 404. The request is answered 201 after Fault.Delay (real
	// time), or never if the client gives up first (logged with Status
	// 0); after the commit a repeat gets the 201, replayed. Its webhook
	// event ([WithWebhook]) is sent once it commits, not when it arrives.
	StillRunning FaultKind = "still-running"
	// LostAnswerLag commits and performs the side effect, then closes the
	// connection with no response (as DropAfterCommit), and the result
	// endpoint answers 404 until Fault.Delay has passed since the commit,
	// by the server's clock (as QueryLag): a lost answer with a read path
	// behind the write. A repeat gets the 201, replayed.
	LostAnswerLag FaultKind = "lost-answer-lag"
	// StillRunningDecline is a [StillRunning] request that fails: 409 to
	// a repeat and 404 from the result endpoint while it runs, then it
	// commits a failed result (402, "card declined") with no side effect,
	// as Stripe saves a decline once its risk check has run ("results
	// are only saved if an API endpoint started executing",
	// https://docs.stripe.com/api/idempotent_requests). The request is
	// answered the 402 after Fault.Delay unless its client gave up; after
	// the commit a repeat gets the 402, replayed, and the result endpoint
	// answers failed.
	StillRunningDecline FaultKind = "still-running-decline"
	// StillRunningProcessing is a [StillRunning] request whose result
	// endpoint knows it while it runs: it answers 200
	// {"state":"processing","key":…} until the commit, instead of 404
	// (modelled: an operation-status endpoint). Repeats get Stripe's 409
	// meanwhile; after the commit the 201, replayed, and the result
	// endpoint the order.
	StillRunningProcessing FaultKind = "still-running-processing"
)

// FaultKinds returns every fault kind, in a fixed order: the order in which
// a [Profile]'s rates are laid out.
func FaultKinds() []FaultKind {
	var kinds []FaultKind
	for _, k := range fakeserver.FaultKinds() {
		kinds = append(kinds, FaultKind(k))
	}
	return kinds
}

// Fault is a scripted fault; see [Server.Inject]. Its JSON form, the body
// of POST /_faults, has the fields kind, count, key, query, delay and
// retry_after (Go duration strings such as "2s") and http_date.
type Fault struct {
	// Kind is the fault.
	Kind FaultKind
	// Count is how many of the next matching requests the fault applies
	// to; 0 means 1.
	Count int
	// Key restricts the fault to requests with this key; "" matches any.
	Key string
	// Query makes the fault match result queries (GET /operations/{key})
	// instead of submits. Only ErrorBeforeCommit, Throttle, Unavailable,
	// DelayResponse, GarbageBody, TruncatedBody and DropAfterCommit apply
	// to queries.
	Query bool
	// Delay is the duration of the DelayResponse, QueryLag, SlowProcessing,
	// Preempt, StillRunning (and its variants) and LostAnswerLag faults.
	Delay time.Duration
	// RetryAfter is the Retry-After of Throttle (429), Unavailable (503)
	// and the 409 of slow processing, in whole seconds rounded up; 0 means
	// 1s.
	RetryAfter time.Duration
	// HTTPDate sends Retry-After as an HTTP-date instead of delta-seconds.
	HTTPDate bool
}

// MarshalJSON encodes f as POST /_faults takes it: snake_case names and
// durations as Go duration strings.
func (f Fault) MarshalJSON() ([]byte, error) { return json.Marshal(f.internal()) }

// UnmarshalJSON decodes the form written by [Fault.MarshalJSON]; unknown
// fields are an error.
func (f *Fault) UnmarshalJSON(data []byte) error {
	var in fakeserver.Fault
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*f = faultOf(in)
	return nil
}

// Profile sets random faults, reproducible from the seed (see [WithSeed]).
// For each submit the server draws one number and picks at most one fault:
// the rates are laid out on [0,1) in the order of [FaultKinds]. A picked
// fault that does not match the submit (a decline on a replay, say) does
// nothing. Result queries never get a random fault.
type Profile struct {
	// Rates is the probability (0..1) per submit of each fault; the rates
	// sum to at most 1.
	Rates map[FaultKind]float64
	// Delay is the duration of the DelayResponse, QueryLag, SlowProcessing,
	// Preempt, StillRunning (and its variants) and LostAnswerLag faults, as
	// in [Fault].
	Delay time.Duration
	// RetryAfter is the Retry-After of Throttle, Unavailable and the 409
	// of slow processing, as in [Fault].
	RetryAfter time.Duration
	// HTTPDate sends Retry-After as an HTTP-date, as in [Fault].
	HTTPDate bool
}

// Stats are the server's counters since NewServer or Reset. Requests to
// the /_ endpoints are not counted. Its JSON form is the body of GET
// /_stats.
type Stats struct {
	// Requests counts every request but the /_ ones.
	Requests int `json:"requests"`
	// Submits counts the POST, PUT, PATCH and DELETE to resource paths.
	Submits int `json:"submits"`
	// Queries counts the GET /operations/{key}.
	Queries int `json:"queries"`
	// SideEffects counts the resources created by requests received.
	SideEffects int `json:"side_effects"`
	// Keys is the number of keys stored now (not expired).
	Keys int `json:"keys"`
	// MaxEffectsPerKey is the largest number of side effects for one
	// (scope, key), across expiries: 1 means "exactly one order per intent"
	// held so far.
	MaxEffectsPerKey int `json:"max_effects_per_key"`
	// Replays counts the stored answers replayed.
	Replays int `json:"replays"`
	// Conflicts counts the answers that a key was reused with a different
	// request (422, or the behaviour's status).
	Conflicts int `json:"conflicts"`
	// Refusals counts the 400 -2010 "Duplicate order sent." of an order
	// API ([ClientOrderID]): an id sent again while its order exists.
	Refusals int `json:"refusals"`
	// ForeignEffects counts the side effects of someone else's requests
	// ([Server.Preempt] and the Preempt fault), not in SideEffects.
	ForeignEffects int `json:"foreign_effects"`
	// MaxSubmitsAfterFinal is the largest KeyStats.SubmitsAfterFinal of any
	// key: how often one key was resent at most once its answer could no
	// longer change.
	MaxSubmitsAfterFinal int `json:"max_submits_after_final"`
}

// KeyStats are the counters of one key, across expiries; see
// [Server.KeyStats]. Its JSON form is the body of GET /_key.
type KeyStats struct {
	// Effects counts the side effects of requests received: 2 means the
	// key executed again after it expired.
	Effects int `json:"effects"`
	// ForeignEffects counts the side effects of someone else's requests
	// ([Server.Preempt], the Preempt fault).
	ForeignEffects int `json:"foreign_effects"`
	// SubmitsAfterFinal counts the submits received while the key's answer
	// was final: stored, and neither in flight nor processing. A client
	// that keeps resending a key whose answer cannot change makes it grow.
	// A submit a fault turns away unprocessed (throttle, unavailable,
	// error-before-commit) does not: it told the client to send again.
	SubmitsAfterFinal int `json:"submits_after_final"`
	// Conflicts counts the answers that the key was used with another
	// request (422, or the behaviour's status).
	Conflicts int `json:"conflicts"`
	// Refusals counts an order API's 400 -2010 "Duplicate order sent." to
	// the key sent again while its order exists ([ClientOrderID]).
	Refusals int `json:"refusals"`
}

// Request is one request received, as the server logged it; see
// [Server.Requests].
type Request struct {
	// Method is the request's method.
	Method string
	// Path is the URL path, unescaped.
	Path string
	// Scope is the value of the scope header ("" if none).
	Scope string
	// Key is the parsed key ("" if missing or invalid); for a query, the
	// key from the path.
	Key string
	// RawKey is the key header's value as sent; for a query, the escaped
	// path segment.
	RawKey string
	// BodySHA256 is the SHA-256 of the body read; zero if it was not read.
	BodySHA256 [32]byte
	// Status is the status answered; 0 if none was: the connection was
	// dropped, or the client gave up while a fault held the answer
	// (DelayResponse, StillRunning and its variants).
	Status int
	// Fault is the fault applied to the request; "" for none.
	Fault FaultKind
	// At is the arrival time, by the server's clock.
	At time.Time
}

// Behavior is how the server answers a key it has seen: which kind of real
// Idempotency-Key middleware it models, or with KeyMember which order API
// whose key is a client order id in the body; see [WithBehavior]. Its
// knobs combine; the presets ([IETFDraft], [StoredErrors],
// [NoBodyCompare], [Conflict417], [ShortWindow], [ClientOrderID],
// [KeyIgnored]) each turn one. The zero value is the IETF
// draft.
type Behavior struct {
	// Name labels the behaviour: the preset's name ("stored-errors", …),
	// the -behavior flag of cmd/idem-fakeserver and the "name" of GET
	// /_behavior. "" reads as the knobs' description (see
	// [Behavior.String]).
	Name string
	// StoreErrors makes the handler's 500 (ErrorBeforeCommit,
	// ErrorAfterCommit) and 503 (Unavailable) the key's answer, replayed
	// with Idempotent-Replayed: true for the key's life. The 429 of
	// Throttle, a rate limiter in front of the middleware, is never stored.
	StoreErrors bool
	// NoBodyCompare replays a used key's answer to any request with that
	// key, whatever its method, path or body: a silent replay.
	NoBodyCompare bool
	// ConflictStatus is the status of the answer to a different request
	// with a used key; 0 means 422, as in the IETF draft. A 4xx.
	ConflictStatus int
	// Retention is the key window; 0 leaves it to [WithRetention], else
	// 24h. Setting both to different values is an error.
	Retention time.Duration
	// KeyMember, when set, makes the server an order API whose key is the
	// client order id in the request body's top-level JSON member of this
	// name; no key header is read. A repeated id whose order exists is
	// refused with Binance's 400 {"code":-2010,"msg":"Duplicate order
	// sent."}, never replayed; an order never placed (declined, rejected)
	// leaves its id free. Orders are answered in Binance's spot shape
	// (200 {"orderId","clientOrderId","status":"FILLED"}, "NEW" while
	// slow-processing; a decline or reject-409 is Binance's 400 -2010), the
	// result endpoint by client order id, or 400
	// {"code":-2013,"msg":"Order does not exist."}. It takes no
	// StoreErrors, NoBodyCompare or ConflictStatus. See [ClientOrderID].
	KeyMember string
	// OpenOnly, with KeyMember, holds a client order id only while its
	// order is open: once filled, a repeat places a second order
	// (Binance's newClientOrderId, "unique among open orders").
	OpenOnly bool
	// KeyIgnored makes the server an endpoint that does not de-duplicate
	// by the key: every submit executes, a new order each time, and the
	// handler's answers carry "Idempotency-Status: ignored" (Solidgate's
	// endpoints without idempotency support); the result endpoint answers
	// the key's last order. It takes no StoreErrors, NoBodyCompare,
	// ConflictStatus or KeyMember. See [KeyIgnored].
	KeyIgnored bool
}

// String returns b.Name, or if it is "" the knobs that differ from the
// IETF draft, joined by "+" ("store-errors+conflict-417"), or "ietf-draft"
// when none does.
func (b Behavior) String() string { return fakeserver.Behavior(b).String() }

// Description returns a one-line description of the behaviour: how it
// differs from the IETF draft.
func (b Behavior) Description() string { return fakeserver.Behavior(b).Description() }

// ShortWindowRetention is the key window of [ShortWindow]: 30 minutes, the
// default of the Fiber framework's idempotency middleware.
const ShortWindowRetention = 30 * time.Minute

// IETFDraft is the default behaviour, the IETF draft's: 400 without a key,
// 409 while a request with the key is in flight, 422 for the key with
// another request; server errors are not stored.
func IETFDraft() Behavior { return Behavior(fakeserver.IETFDraft()) }

// StoredErrors stores the handler's 500 and 503 as the key's answer and
// replays them, marked replayed, for the life of the key.
func StoredErrors() Behavior { return Behavior(fakeserver.StoredErrors()) }

// NoBodyCompare replays a used key's answer, marked replayed, to any
// request with the key, whatever its body: a silent replay.
func NoBodyCompare() Behavior { return Behavior(fakeserver.NoBodyCompare()) }

// Conflict417 answers 417, instead of 422, to a used key with another
// request.
func Conflict417() Behavior { return Behavior(fakeserver.Conflict417()) }

// ShortWindow forgets a key after ShortWindowRetention (30 minutes).
func ShortWindow() Behavior { return Behavior(fakeserver.ShortWindow()) }

// ClientOrderIDMember is the body member holding the key under
// [ClientOrderID]: client_order_id, Alpaca's name.
const ClientOrderIDMember = fakeserver.ClientOrderIDMember

// ClientOrderID is an order API whose key is the client order id in the
// body's client_order_id (Alpaca's client_order_id, Binance's
// newClientOrderId, KuCoin's clientOid): a repeated id is refused with
// Binance's 400 -2010 "Duplicate order sent.", never replayed, for the key
// window (24h); the result endpoint ([Server.ResultTemplate]) answers the
// order by client order id in Binance's shape, or 400 -2013 "Order does
// not exist.". A client talks to it as idem's README says for such APIs:
// idem.WithKeyInBody, the result endpoint, and a Decoder that reads the
// order (idem's ExampleWithDecoder_clientOrderID).
func ClientOrderID() Behavior { return Behavior(fakeserver.ClientOrderID()) }

// KeyIgnored is an endpoint that ignores the key, as Solidgate's without
// idempotency support ("A value of ignored means the endpoint does not",
// https://api-docs.solidgate.com/api/v2/idempotent-requests): every submit
// executes, a new order counted in the key's [KeyStats.Effects], its
// answers marked "Idempotency-Status: ignored" (not the 500, 429 and 503
// of the faults that answer instead of it); the result endpoint answers
// the key's last order. Not one of [Behaviors]: a client can flag a
// second order there, not always prevent it.
func KeyIgnored() Behavior { return Behavior(fakeserver.KeyIgnored()) }

// Behaviors returns the presets, IETFDraft first; not [KeyIgnored].
func Behaviors() []Behavior {
	var bs []Behavior
	for _, b := range fakeserver.Behaviors() {
		bs = append(bs, Behavior(b))
	}
	return bs
}

// BehaviorNamed returns the preset of [Behaviors] called name
// ("stored-errors", …), or an error listing the names.
func BehaviorNamed(name string) (Behavior, error) {
	b, err := fakeserver.BehaviorNamed(name)
	if err != nil {
		return Behavior{}, fmt.Errorf("idemtest: %w", err)
	}
	return Behavior(b), nil
}
