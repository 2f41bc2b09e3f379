package idemtest

import "github.com/idemkit/idem/internal/fakeserver"

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
	// Replays and Conflicts (422). Requests to /_ endpoints are not counted.
	Stats = fakeserver.Stats
	// Request is one request received, as logged by the server: Method,
	// Path, Scope, Key (parsed; "" if missing or invalid), RawKey,
	// BodySHA256, Status (0 if the connection was dropped), Fault and At.
	Request = fakeserver.Request
)

// The faults. As submit faults, [ErrorBeforeCommit], [Throttle] and
// [Unavailable] match any submit with a valid key; [Decline],
// [SlowProcessing] and [QueryLag] only a submit that executes (a new key);
// the others a submit that executes or replays, not one that gets 409, 422
// or 503.
const (
	// DropAfterCommit commits and performs the side effect, then closes the
	// connection with no response.
	DropAfterCommit = fakeserver.DropAfterCommit
	// DelayResponse commits and performs the side effect, then answers after
	// Fault.Delay, or when the client gives up; repeats get 409 meanwhile.
	DelayResponse = fakeserver.DelayResponse
	// ErrorAfterCommit commits and performs the side effect, then answers
	// 500; a replay returns the stored result.
	ErrorAfterCommit = fakeserver.ErrorAfterCommit
	// ErrorBeforeCommit answers 500 and records nothing.
	ErrorBeforeCommit = fakeserver.ErrorBeforeCommit
	// Throttle answers 429 with Retry-After and records nothing.
	Throttle = fakeserver.Throttle
	// Unavailable answers 503 with Retry-After and records nothing.
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
)

// FaultKinds returns every fault kind, in a fixed order.
func FaultKinds() []FaultKind { return fakeserver.FaultKinds() }
