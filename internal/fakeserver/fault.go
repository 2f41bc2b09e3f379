package fakeserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FaultKind names a fault. Its string form is the Go constant's name in
// kebab case (DelayResponse is "delay-response"): one word per fault, used
// as the kind in JSON (POST /_faults), in [Request.Fault], as the rate flag
// of cmd/idem-fakeserver and as the fault flag of examples/orders.
type FaultKind string

// The faults. "Commit" means the key, the request digest, the side effect
// and the stored result, recorded atomically.
//
// Submit faults match as follows: [ErrorBeforeCommit], [Throttle] and
// [Unavailable] match any submit with a valid key and replace its
// processing; [Decline], [Reject409], [SlowProcessing], [QueryLag],
// [Preempt], [StillRunning], [LostAnswerLag], [StillRunningDecline] and
// [StillRunningProcessing] shape a commit, so they
// match only a submit that executes (a new key); the other faults shape a response, so they match a submit that
// executes or replays, not one that gets 409, 422 or 503. Under
// [Behavior.StoreErrors], [ErrorAfterCommit], [ErrorBeforeCommit] and
// [Unavailable] are the handler's answers: they match only a submit that
// executes, and are stored as the key's answer.
const (
	// DropAfterCommit commits and performs the side effect, then hijacks
	// and closes the connection with no response. As a query fault it
	// closes the connection with no answer.
	DropAfterCommit FaultKind = "drop-after-commit"
	// DelayResponse commits and performs the side effect, then waits
	// Fault.Delay (real time) before answering; a client that gives up
	// first gets nothing (logged with Status 0). Meanwhile a repeat of the submit gets 409. As a query
	// fault it delays the answer.
	DelayResponse FaultKind = "delay-response"
	// ErrorAfterCommit commits and performs the side effect, then answers
	// 500. The 500 is not stored: a replay returns the stored result;
	// under Behavior.StoreErrors, it is stored and replayed.
	ErrorAfterCommit FaultKind = "error-after-commit"
	// ErrorBeforeCommit answers 500 and records nothing; under
	// Behavior.StoreErrors, it stores the 500 as the key's answer, with no
	// side effect.
	ErrorBeforeCommit FaultKind = "error-before-commit"
	// Throttle answers 429 with Retry-After and records nothing.
	Throttle FaultKind = "throttle"
	// Unavailable answers 503 with Retry-After and records nothing; under
	// Behavior.StoreErrors, it stores the 503 as the key's answer, with no
	// side effect.
	Unavailable FaultKind = "unavailable"
	// QueryLag commits normally, but GET /operations/{key} answers 404
	// until Fault.Delay has passed since the commit (read-replica lag).
	QueryLag FaultKind = "query-lag"
	// SlowProcessing commits, performs the side effect and answers 202
	// {"state":"processing",…}. The operation reports processing until
	// Fault.Delay has passed, then succeeded; a repeat of the submit while
	// processing gets 409 with Retry-After, and after it a replay of 201
	// succeeded. Its succeeded webhook event is queued once processing
	// ends, by the server's clock, as the result endpoint says it then.
	SlowProcessing FaultKind = "slow-processing"
	// GarbageBody commits and performs the side effect, then answers 201
	// with a body that is not JSON.
	GarbageBody FaultKind = "garbage-body"
	// TruncatedBody commits and performs the side effect, then answers 201
	// with a JSON body cut in half: Content-Length announces the whole body
	// and the connection is closed.
	TruncatedBody FaultKind = "truncated-body"
	// Decline commits a failed result with no side effect: 402
	// {"state":"failed","reason":"card declined",…}; replays and queries
	// return failed.
	Decline FaultKind = "decline"
	// Reject409 is the handler refusing the order with 409 (it conflicts
	// with the resource's state): it commits a failed result with no side
	// effect; replays answer the stored 409, queries failed. Unlike the
	// 409 of a request in flight, it is the key's final answer. An order
	// API (Behavior.KeyMember) refuses it as Binance refuses any order,
	// 400 -2010, and leaves the id free.
	Reject409 FaultKind = "reject-409"
	// Preempt makes someone else use the key first: just before this
	// submit, another request with the same key and another body arrives
	// and executes (a side effect counted in KeyStats.ForeignEffects, not
	// Effects), processing for Fault.Delay. This submit, and repeats until
	// then, get 409; after it, the answer to a used key with another
	// request (422, the behaviour's conflict status, or under
	// Behavior.NoBodyCompare a silent replay of the other request's 201).
	// See also [Server.Preempt].
	Preempt FaultKind = "preempt"
	// StillRunning starts the order but commits it only once Fault.Delay
	// has passed by the server's clock: the request is still running, and
	// its side effect (counted when it arrives: it will happen, whether
	// or not its client waits) not yet committed. Meanwhile a repeat of the submit, whatever its body, gets
	// Stripe's 409 idempotency_key_in_use ("There is currently another
	// in-progress request using this Idempotent Key (…): <key>. …", no
	// Retry-After:
	// https://docs.stripe.com/error-codes#idempotency-key-in-use), and the
	// result endpoint answers 404, as it does for a key it never saw. The
	// request itself is answered 201 after Fault.Delay (real time), or not
	// at all if the client gives up first: a timeout while it runs (logged
	// with Status 0). After the commit a repeat gets the stored 201,
	// replayed. Its webhook event is queued once it commits, by the
	// server's clock, not when it arrives.
	StillRunning FaultKind = "still-running"
	// LostAnswerLag commits and performs the side effect, then closes the
	// connection with no response, as DropAfterCommit does; and the result
	// endpoint answers 404 until Fault.Delay has passed since the commit,
	// by the server's clock, as QueryLag does (a read replica or search
	// index behind the write: Stripe's Search API, "data is not available
	// for search for up to a minute", https://docs.stripe.com/search). A
	// repeat of the submit gets the stored 201, replayed, lag or not.
	LostAnswerLag FaultKind = "lost-answer-lag"
	// StillRunningDecline is StillRunning for a request that fails: it
	// runs for Fault.Delay, as StillRunning (409 idempotency_key_in_use
	// to a repeat, 404 from the result endpoint), then commits a failed
	// result, 402 {"state":"failed","reason":"card declined",…}, with no
	// side effect: a decline once the provider's risk check has run,
	// which Stripe saves as the key's result because the endpoint started
	// executing ("results are only saved if an API endpoint started
	// executing", https://docs.stripe.com/api/idempotent_requests). The
	// request itself is answered the 402 after Fault.Delay, unless its
	// client gave up; after the commit a repeat gets the 402, replayed,
	// and the result endpoint answers failed.
	StillRunningDecline FaultKind = "still-running-decline"
	// StillRunningProcessing is StillRunning with a result endpoint that
	// knows the request while it runs: GET /operations/{key} answers 200
	// {"state":"processing","key":…} until the commit, instead of 404 (an
	// operation-status endpoint, as a long-running operation's "done":
	// false or a payment's "processing"; modelled). Repeats of the submit
	// get Stripe's 409 meanwhile, as under StillRunning; after the commit
	// the 201, replayed, and the result endpoint the order.
	StillRunningProcessing FaultKind = "still-running-processing"
)

// faultKinds lists every kind in a fixed order, which is also the order in
// which a [Profile]'s rates are laid out on [0,1).
var faultKinds = []FaultKind{
	DropAfterCommit, DelayResponse, ErrorAfterCommit, ErrorBeforeCommit,
	Throttle, Unavailable, QueryLag, SlowProcessing, GarbageBody,
	TruncatedBody, Decline, Reject409, Preempt, StillRunning, LostAnswerLag,
	StillRunningDecline, StillRunningProcessing,
}

// FaultKinds returns every fault kind, in a fixed order.
func FaultKinds() []FaultKind {
	return append([]FaultKind(nil), faultKinds...)
}

// Description returns a one-line description of the fault, or "" for an
// unknown kind.
func (k FaultKind) Description() string {
	switch k {
	case DropAfterCommit:
		return "commit and side effect, then close the connection with no response"
	case DelayResponse:
		return "commit and side effect, then answer after the delay (repeats get 409 meanwhile)"
	case ErrorAfterCommit:
		return "commit and side effect, then answer 500 (a replay returns the stored result; stored-errors: the 500)"
	case ErrorBeforeCommit:
		return "answer 500; nothing recorded, no side effect (stored-errors: the 500 is stored)"
	case Throttle:
		return "answer 429 with Retry-After; nothing recorded"
	case Unavailable:
		return "answer 503 with Retry-After; nothing recorded (stored-errors: the 503 is stored)"
	case QueryLag:
		return "commit normally, but the result endpoint answers 404 for the delay after the commit"
	case SlowProcessing:
		return "commit and side effect, answer 202 processing; processing for the delay, then succeeded"
	case GarbageBody:
		return "commit and side effect, then answer 201 with a body that is not JSON"
	case TruncatedBody:
		return "commit and side effect, then answer 201 with a truncated JSON body and close"
	case Decline:
		return "commit a failed result (402, card declined), no side effect"
	case Reject409:
		return "commit a failed result (409, conflicts with the resource's state), no side effect"
	case Preempt:
		return "someone else's request with the key and another body executes first, processing for the delay (409 meanwhile, then 422 or a silent replay)"
	case StillRunning:
		return "the request runs for the delay before it commits (repeats get Stripe's 409 idempotency_key_in_use, the result endpoint 404), answered 201 after it unless the client gave up"
	case LostAnswerLag:
		return "commit and side effect, close the connection with no response; the result endpoint answers 404 for the delay after the commit"
	case StillRunningDecline:
		return "as still-running, but it then commits a failed result (402, card declined), no side effect: repeats get the 409 while it runs, then the 402 replayed"
	case StillRunningProcessing:
		return "as still-running, but the result endpoint answers 200 processing while it runs, instead of 404"
	}
	return ""
}

func (k FaultKind) known() bool { return k.Description() != "" }

// renamedKinds maps the kinds' former names to their names now. They are
// refused, not accepted as aliases: one name per fault, and an error that
// names the new word fixes a script at once.
var renamedKinds = map[FaultKind]FaultKind{
	"delay":             DelayResponse,
	"500-after-commit":  ErrorAfterCommit,
	"500-before-commit": ErrorBeforeCommit,
	"429":               Throttle,
	"503":               Unavailable,
}

// Renamed returns the current name of a fault kind's former name ("503"
// gives "unavailable"), and whether old is one.
func Renamed(old string) (FaultKind, bool) {
	k, ok := renamedKinds[FaultKind(old)]
	return k, ok
}

// unknownKindError says that k is not a fault kind, naming the kind it was
// renamed to if it is a former name.
func unknownKindError(k FaultKind) error {
	if now, ok := renamedKinds[k]; ok {
		return fmt.Errorf("fault kind %q was renamed %q (want one of: %s)", k, now, kindList(faultKinds))
	}
	return fmt.Errorf("unknown fault kind %q (want one of: %s)", k, kindList(faultKinds))
}

// replacesProcessing reports whether k answers instead of processing the
// request, recording nothing.
func (k FaultKind) replacesProcessing() bool {
	return k == ErrorBeforeCommit || k == Throttle || k == Unavailable
}

// shapesCommit reports whether k changes what a new key commits.
func (k FaultKind) shapesCommit() bool {
	return k == Decline || k == Reject409 || k == SlowProcessing || k == QueryLag || k == Preempt ||
		k.runs() || k == LostAnswerLag
}

// runs reports whether k is a request that runs for its delay before it
// commits: StillRunning and its variants.
func (k FaultKind) runs() bool {
	return k == StillRunning || k == StillRunningDecline || k == StillRunningProcessing
}

// shapesAnswer reports whether k, which shapes the commit, also shapes the
// answer to the request that committed: held, or dropped.
func (k FaultKind) shapesAnswer() bool { return k.runs() || k == LostAnswerLag }

// storedUnder reports whether, under b, k is the handler's answer, stored
// as the key's answer.
func (k FaultKind) storedUnder(b Behavior) bool {
	return b.StoreErrors && (k == ErrorAfterCommit || k == ErrorBeforeCommit || k == Unavailable)
}

// queryable reports whether k can apply to a result query.
func (k FaultKind) queryable() bool {
	switch k {
	case ErrorBeforeCommit, Throttle, Unavailable, DelayResponse, GarbageBody, TruncatedBody, DropAfterCommit:
		return true
	}
	return false
}

// Fault is a scripted fault, injected with [Server.Inject] or POST /_faults.
// Its JSON form has the fields kind, count, key, query, delay and
// retry_after (Go duration strings such as "2s") and http_date.
type Fault struct {
	Kind FaultKind
	// Count is how many of the next matching requests the fault applies
	// to; 0 means 1.
	Count int
	// Key restricts the fault to requests with this key; "" matches any.
	Key string
	// Query makes the fault match result queries (GET /operations/{key})
	// instead of submits. Only error-before-commit, throttle, unavailable,
	// delay-response, garbage-body, truncated-body and drop-after-commit
	// apply to queries.
	Query bool
	// Delay is the duration of the delay-response, query-lag,
	// slow-processing, preempt, lost-answer-lag and still-running faults
	// (the latter's variants too).
	Delay time.Duration
	// RetryAfter is the Retry-After of throttle (429), unavailable (503)
	// and the 409 of slow processing, in whole seconds rounded up; 0 means 1s.
	RetryAfter time.Duration
	// HTTPDate sends Retry-After as an HTTP-date instead of delta-seconds.
	HTTPDate bool
}

// Profile sets probabilistic faults. For each submit the server draws one
// number from its seeded RNG and picks at most one fault: the rates are laid
// out on [0,1) in the order of [FaultKinds]. A picked fault that does not
// match the submit (a decline on a replay, say) does nothing. Every submit
// with a valid key and an acceptable body draws exactly once, so the n-th
// such submit's fault depends only on the seed and n. Queries never draw.
type Profile struct {
	// Rates is the probability (0..1) per submit of each fault; the rates
	// sum to at most 1.
	Rates map[FaultKind]float64
	// Delay, RetryAfter and HTTPDate are as in [Fault]; Delay also serves
	// query-lag, slow-processing, preempt, still-running and
	// lost-answer-lag.
	Delay      time.Duration
	RetryAfter time.Duration
	HTTPDate   bool
}

// kindList returns kinds as a comma-separated list, for error messages.
func kindList(kinds []FaultKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// queryKinds lists the kinds that apply to result queries, in the order of
// [FaultKinds].
func queryKinds() []FaultKind {
	var kinds []FaultKind
	for _, k := range faultKinds {
		if k.queryable() {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// checkDuration refuses a negative duration named what.
func checkDuration(what string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s %v is negative (want 0 or a positive duration)", what, d)
	}
	return nil
}

// validate returns why f cannot be injected, or nil. Its messages say what
// to change.
func (f Fault) validate() error {
	if !f.Kind.known() {
		return unknownKindError(f.Kind)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault %s: count %d is negative (want 0 for one request, or the number of requests to fault)", f.Kind, f.Count)
	}
	if err := checkDuration("delay", f.Delay); err != nil {
		return fmt.Errorf("fault %s: %w", f.Kind, err)
	}
	if err := checkDuration("retry-after", f.RetryAfter); err != nil {
		return fmt.Errorf("fault %s: %w", f.Kind, err)
	}
	if f.Query && !f.Kind.queryable() {
		return fmt.Errorf("fault %s does not apply to result queries (want Query false, or a query fault: %s)", f.Kind, kindList(queryKinds()))
	}
	return nil
}

// validate returns why p cannot be used, or nil. Its messages say what to
// change.
func (p Profile) validate() error {
	// Sorted, so that the message for a profile with several errors does
	// not depend on map order.
	kinds := make([]FaultKind, 0, len(p.Rates))
	for k := range p.Rates {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	sum := 0.0
	for _, k := range kinds {
		rate := p.Rates[k]
		if !k.known() {
			return unknownKindError(k)
		}
		if !(rate >= 0 && rate <= 1) {
			return fmt.Errorf("rate of %s is %v (want a probability between 0 and 1)", k, rate)
		}
		sum += rate
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("rates sum to %v (want at most 1: a request gets at most one fault)", sum)
	}
	if err := checkDuration("delay", p.Delay); err != nil {
		return err
	}
	return checkDuration("retry-after", p.RetryAfter)
}

// clone returns p with its own copy of Rates.
func (p Profile) clone() Profile {
	rates := make(map[FaultKind]float64, len(p.Rates))
	for k, v := range p.Rates {
		rates[k] = v
	}
	p.Rates = rates
	return p
}

type faultJSON struct {
	Kind       FaultKind `json:"kind"`
	Count      int       `json:"count,omitempty"`
	Key        string    `json:"key,omitempty"`
	Query      bool      `json:"query,omitempty"`
	Delay      string    `json:"delay,omitempty"`
	RetryAfter string    `json:"retry_after,omitempty"`
	HTTPDate   bool      `json:"http_date,omitempty"`
}

// MarshalJSON encodes f with snake_case names and durations as Go duration
// strings.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Kind: f.Kind, Count: f.Count, Key: f.Key, Query: f.Query, HTTPDate: f.HTTPDate}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	if f.RetryAfter != 0 {
		j.RetryAfter = f.RetryAfter.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the form written by [Fault.MarshalJSON]; unknown
// fields are an error.
func (f *Fault) UnmarshalJSON(data []byte) error {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return jsonFieldError(err)
	}
	out := Fault{Kind: j.Kind, Count: j.Count, Key: j.Key, Query: j.Query, HTTPDate: j.HTTPDate}
	var err error
	if out.Delay, err = parseDuration("delay", j.Delay); err != nil {
		return err
	}
	if out.RetryAfter, err = parseDuration("retry_after", j.RetryAfter); err != nil {
		return err
	}
	*f = out
	return nil
}

// jsonWants says, per field of the JSON form of a [Fault], what value it
// takes.
var jsonWants = map[string]string{
	"kind":        `a string such as "unavailable"`,
	"count":       "a whole number",
	"key":         "a string",
	"query":       "true or false",
	"delay":       `a duration string such as "2s"`,
	"retry_after": `a duration string such as "1s"`,
	"http_date":   "true or false",
}

// jsonFieldError rewords a type error of encoding/json, which names the
// internal Go type ("Go struct field faultJSON.retry_after of type
// string"), to name the field as the caller wrote it and the value it
// takes. Other errors are returned as they are: they already speak JSON.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	if te.Field == "" {
		return fmt.Errorf("got a JSON %s, want an object such as {\"kind\":\"unavailable\",\"retry_after\":\"2s\"}", jsonValueKind(te.Value))
	}
	want, ok := jsonWants[te.Field]
	if !ok {
		want = "another type"
	}
	return fmt.Errorf("%s: got a JSON %s, want %s", te.Field, jsonValueKind(te.Value), want)
}

// jsonValueKind returns the kind of a JSON value as encoding/json describes
// it ("number -5" is a number).
func jsonValueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	return kind
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	return d, nil
}
