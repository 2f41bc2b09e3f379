package idemtest

import "github.com/idemkit/idem/internal/fakeserver"

// Types of the fake server, named here so that users can use them.
type (
	// Fault is a scripted fault; see [Server.Inject].
	Fault = fakeserver.Fault
	// FaultKind names a fault.
	FaultKind = fakeserver.FaultKind
	// Profile sets random faults, reproducible from the seed.
	Profile = fakeserver.Profile
	// Stats are the server's counters.
	Stats = fakeserver.Stats
	// Request is one request received, as logged by the server.
	Request = fakeserver.Request
)

// The faults; see [FaultKind] in package fakeserver for which requests each
// one matches.
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
