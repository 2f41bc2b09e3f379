package idemtest

import (
	"fmt"

	"github.com/idemkit/idem/internal/fakeserver"
)

// Types of the fake server, named here so that users can use them. Their
// package is internal, so go doc does not show their fields here: each
// comment lists them.
type (
	// Fault is a scripted fault; see [Server.Inject]. Fields: Kind; Count,
	// how many of the next matching requests (0 means 1); Key, only
	// requests with this key ("" for any); Query, result queries instead of
	// submits; Delay, for the delay, query-lag and slow-processing faults;
	// RetryAfter, for 429, 503 and the 409 of slow processing (whole
	// seconds, 0 means 1s); HTTPDate, Retry-After as an HTTP-date.
	Fault = fakeserver.Fault
	// FaultKind names a fault. Its string form ("drop-after-commit",
	// "503", …) is the kind in POST /_faults.
	FaultKind = fakeserver.FaultKind
	// Profile sets random faults, reproducible from the seed. Fields: Rates,
	// a map from FaultKind to its probability per submit (0..1, summing to
	// at most 1; a submit gets at most one fault); Delay, RetryAfter and
	// HTTPDate, as in Fault. Result queries never get a random fault.
	Profile = fakeserver.Profile
	// Stats are the server's counters since NewServer or Reset: Requests,
	// Submits, Queries, SideEffects, Keys (stored now), MaxEffectsPerKey,
	// Replays, Conflicts (422, or the behaviour's status), ForeignEffects
	// (someone else's side effects) and MaxSubmitsAfterFinal (the largest
	// KeyStats.SubmitsAfterFinal). Requests to /_ endpoints are not counted.
	Stats = fakeserver.Stats
	// Behavior is how the server answers a key it has seen; see
	// [WithBehavior]. Fields: Name, the preset's name ("stored-errors",
	// …), the -behavior flag of cmd/idem-fakeserver and the "name" of GET
	// /_behavior; StoreErrors, the handler's 500 (before or after the
	// commit) and 503 become the key's answer, replayed with
	// Idempotent-Replayed: true for the key's life; NoBodyCompare, a used
	// key replays its answer to any request (a silent replay);
	// ConflictStatus, the status for a used key with another request (0
	// means 422); Retention, the key window (0: WithRetention's, else 24h).
	Behavior = fakeserver.Behavior
	// KeyStats are the counters of one key, across expiries: Effects, side
	// effects of requests received; ForeignEffects, those of someone
	// else's requests (Server.Preempt, the Preempt fault); and
	// SubmitsAfterFinal, submits that arrived once the key's answer could no
	// longer change; Conflicts, answers that the key was used with another
	// request.
	KeyStats = fakeserver.KeyStats
	// Request is one request received, as logged by the server: Method,
	// Path, Scope, Key (parsed; "" if missing or invalid), RawKey,
	// BodySHA256, Status (0 if the connection was dropped), Fault and At.
	Request = fakeserver.Request
)

// The faults. As submit faults, [ErrorBeforeCommit], [Throttle] and
// [Unavailable] match any submit with a valid key; [Decline], [Reject409],
// [SlowProcessing], [QueryLag] and [Preempt] only a submit that executes (a
// new key); the others a submit that executes or replays, not one that gets
// 409, 422 or 503. Under [StoredErrors], [ErrorAfterCommit],
// [ErrorBeforeCommit] and [Unavailable] match only a submit that executes,
// and their answer is stored as the key's.
const (
	// DropAfterCommit commits and performs the side effect, then closes the
	// connection with no response.
	DropAfterCommit = fakeserver.DropAfterCommit
	// DelayResponse commits and performs the side effect, then answers after
	// Fault.Delay, or when the client gives up; repeats get 409 meanwhile.
	DelayResponse = fakeserver.DelayResponse
	// ErrorAfterCommit commits and performs the side effect, then answers
	// 500; a replay returns the stored result (under StoredErrors, the
	// 500).
	ErrorAfterCommit = fakeserver.ErrorAfterCommit
	// ErrorBeforeCommit answers 500 and records nothing (under
	// StoredErrors, it stores the 500, with no side effect).
	ErrorBeforeCommit = fakeserver.ErrorBeforeCommit
	// Throttle answers 429 with Retry-After and records nothing.
	Throttle = fakeserver.Throttle
	// Unavailable answers 503 with Retry-After and records nothing (under
	// StoredErrors, it stores the 503, with no side effect).
	Unavailable = fakeserver.Unavailable
	// QueryLag commits, but the result endpoint answers 404 until
	// Fault.Delay has passed since the commit.
	QueryLag = fakeserver.QueryLag
	// SlowProcessing commits, performs the side effect and answers 202
	// processing; the operation is processing until Fault.Delay has passed,
	// then succeeded. Repeats get 409 meanwhile.
	SlowProcessing = fakeserver.SlowProcessing
	// GarbageBody commits and performs the side effect, then answers 201
	// with a body that is not JSON.
	GarbageBody = fakeserver.GarbageBody
	// TruncatedBody commits and performs the side effect, then answers 201
	// with a truncated JSON body and closes the connection.
	TruncatedBody = fakeserver.TruncatedBody
	// Decline commits a failed result (402, "card declined") with no side
	// effect; replays and queries return failed.
	Decline = fakeserver.Decline
	// Reject409 is the handler refusing with 409: a failed result with no
	// side effect, stored; replays answer the stored 409, queries failed.
	Reject409 = fakeserver.Reject409
	// Preempt makes someone else use the key first, processing for
	// Fault.Delay: this submit gets 409 meanwhile, then the answer to a
	// used key with another request (422, 417 under Conflict417, a silent
	// replay of the other's 201 under NoBodyCompare). See Server.Preempt.
	Preempt = fakeserver.Preempt
)

// FaultKinds returns every fault kind, in a fixed order.
func FaultKinds() []FaultKind { return fakeserver.FaultKinds() }

// ShortWindowRetention is the key window of [ShortWindow]: 30 minutes, the
// default of the Fiber framework's idempotency middleware.
const ShortWindowRetention = fakeserver.ShortWindowRetention

// IETFDraft is the default behaviour, the IETF draft's: 400 without a key,
// 409 while a request with the key is in flight, 422 for the key with
// another request; server errors are not stored.
func IETFDraft() Behavior { return fakeserver.IETFDraft() }

// StoredErrors stores the handler's 500 and 503 as the key's answer and
// replays them, marked replayed, for the life of the key.
func StoredErrors() Behavior { return fakeserver.StoredErrors() }

// NoBodyCompare replays a used key's answer, marked replayed, to any
// request with the key, whatever its body: a silent replay.
func NoBodyCompare() Behavior { return fakeserver.NoBodyCompare() }

// Conflict417 answers 417, instead of 422, to a used key with another
// request.
func Conflict417() Behavior { return fakeserver.Conflict417() }

// ShortWindow forgets a key after ShortWindowRetention (30 minutes).
func ShortWindow() Behavior { return fakeserver.ShortWindow() }

// Behaviors returns the presets, IETFDraft first.
func Behaviors() []Behavior { return fakeserver.Behaviors() }

// BehaviorNamed returns the preset called name ("stored-errors", …), or an
// error listing the names.
func BehaviorNamed(name string) (Behavior, error) {
	b, err := fakeserver.BehaviorNamed(name)
	if err != nil {
		return Behavior{}, fmt.Errorf("idemtest: %w", err)
	}
	return b, nil
}
