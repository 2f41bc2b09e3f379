package journal

import (
	"net/http"
	"time"

	"github.com/idemkit/idem/internal/owned"
)

// State is where an operation stands. Only StateSucceeded and StateFailed
// are terminal; every other state keeps the operation in the open index.
type State string

// The states of an operation, in the order an operation usually meets them.
const (
	// StatePending: journaled; no send has been confirmed.
	StatePending State = "pending"
	// StateProcessing: the server accepted the operation but has not finished it.
	StateProcessing State = "processing"
	// StateSucceeded: terminal; the server performed the operation.
	StateSucceeded State = "succeeded"
	// StateFailed: terminal; the server refused the operation or it failed there.
	StateFailed State = "failed"
	// StateUnknown: the foreground budget ran out without a confirmed result;
	// due for reconciliation.
	StateUnknown State = "unknown"
)

// Terminal reports whether s is final: succeeded or failed.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateFailed }

// Valid reports whether s is one of the five defined states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateProcessing, StateSucceeded, StateFailed, StateUnknown:
		return true
	}
	return false
}

// AttemptKind tells a submit from a result query.
type AttemptKind string

// The kinds of attempt.
const (
	AttemptSubmit AttemptKind = "submit"
	AttemptQuery  AttemptKind = "query"
)

// Attempt is one HTTP exchange made for an operation. A submit attempt is
// journaled before it is sent (Done false) and completed after its outcome
// is known; after a crash, an attempt with Done false means "maybe sent".
type Attempt struct {
	Number int         // 1-based, across submits and queries
	Kind   AttemptKind // submit or query
	Start  time.Time
	// Wrote is true once net/http reported the whole request written
	// (httptrace WroteRequest): the server may have acted on it.
	Wrote bool
	Done  bool // the outcome below is recorded
	// Replayed: the server marked the answer as its stored one for the key
	// (Idempotent-Replayed: true).
	Replayed bool
	// Refused: the answer says this attempt did not execute (409 in
	// flight, 429, a 4xx refusal, a request never written), whatever
	// earlier attempts did. Only attempts that may have reached the server
	// without such an answer make an operation "maybe executed".
	Refused bool
	// Resent: net/http sent the request again on a fresh connection
	// after a copy written whole on a reused one that died (it resends a
	// request with an Idempotency-Key header so): the attempt is two
	// copies, and to a server that ignores the key both may have
	// executed.
	Resent bool
	Status int // HTTP status code; 0 for a transport error
	// Err: the transport or decode error, or the judge's note, for
	// people. The judge reads it too, having no verdict journaled: a
	// refused 2xx with no Err, and a refused 409 whose Err begins with
	// its own words for "the key was used" or "refusing the request for
	// its object's state" (or values), count among the refusals
	// after a send that may have executed; a refused 4xx whose Err begins
	// with its words for "the key's request still runs" does not. Keep it
	// as written.
	Err        string
	RetryAfter time.Duration // Retry-After the server sent, already bounded
	Duration   time.Duration
}

// MaybeExecuted reports whether a may have executed on the server: a
// submit that may have been written (or has no recorded outcome: it is on
// the wire, or the process stopped mid-attempt) and that no answer said
// did not execute. Only then can what the server holds for the key, or an
// event carrying it, be ours.
func (a Attempt) MaybeExecuted() bool {
	return a.Kind == AttemptSubmit && (a.Wrote || !a.Done) && !a.Refused
}

// Result is what the server said about a settled (or processing) operation.
type Result struct {
	ResourceID string
	StatusCode int
	Body       []byte // size-capped copy of the response body
	Reason     string // the server's or the client's reason, for people
	Replayed   bool   // the answer was the server's stored one for the key
}

// Resolution records who settled an operation by hand, and why.
type Resolution struct {
	By     string
	Reason string
	At     time.Time
	From   State // the state the record was in before the resolution
}

// Record is everything needed to resume an operation with no help from the
// caller. It never holds credentials: the client refuses to persist
// Authorization, Cookie and other credential headers (idem.ErrSecretHeader).
type Record struct {
	Scope    string // caller identity / account the key belongs to
	Key      string // idempotency key, unique within Scope
	Ref      string // caller's own reference (order-draft id, …), optional
	Method   string
	URL      string
	QueryURL string      // result endpoint for this key; empty if the API has none
	Header   http.Header // non-secret headers sent on every attempt
	Body     []byte      // exact bytes sent on every attempt
	BodySHA  [32]byte    // SHA-256 of Body

	State    State
	Review   string // why a person must look at it; empty when none
	Attempts []Attempt
	Result   *Result
	Resolved *Resolution // set only by manual resolution
	// Confirmations: outcomes learned from outside (webhook events), at
	// most MaxConfirmations: the latest, and the few older ones its
	// outcome rests on (ApplyConfirmation); set only by Store.Confirm.
	Confirmations []Confirmation

	Created   time.Time
	FirstSent time.Time // start of the first submit attempt that may have reached the server (the key window runs from it); zero if none
	Updated   time.Time
	Settled   time.Time // when it became terminal; zero while open
	NextDue   time.Time // when reconciliation should look at it next

	// Trace is the trace context of the call that journaled the operation
	// (for OpenTelemetry, the W3C traceparent and tracestate), so that a
	// later visit can link back to it; empty when none was given. Like
	// the request, it is set at Create and never changed.
	Trace string

	// KeyPlacement is where the Client that journaled the operation put
	// its key: "header " and the header's canonical name (and " quoted"
	// for an RFC 8941 string), or "body". Set at Create, never changed:
	// a Client that puts the key elsewhere must not send the record (a
	// server would read another key, or none). Empty in a record written
	// before it was journaled (record version 7), or by a caller of the
	// Store's own.
	KeyPlacement string

	owned ownership // see ownership; never encoded
}

// Open reports whether the record belongs in the open index (not terminal).
func (r *Record) Open() bool { return !r.State.Terminal() }

// result is r's Result, an empty one set first if r has none: what a
// confirmation or a manual resolution records goes beside what the
// server last said.
func (r *Record) result() *Result {
	if r.Result == nil {
		r.Result = &Result{}
	}
	return r.Result
}

// ownership marks a record the client built for one Create (see package
// internal/owned): its Body is a private copy and BodySHA is its digest.
// The mark holds only while the record is the one marked, with the body
// and digest it was marked with: a copy of the struct, or a Body or
// BodySHA changed since, is checked and copied in full.
type ownership struct {
	by   *Record
	body []byte
	sum  [32]byte
}

func init() {
	owned.Register(func(v any) {
		switch v := v.(type) {
		case *Record:
			if v != nil {
				v.owned = ownership{by: v, body: v.Body, sum: v.BodySHA}
			}
		case *leaseCtx:
			if v != nil {
				v.owned = true
			}
		}
	})
	owned.RegisterLike(func(ctx, rec any) {
		c, ok := ctx.(*leaseCtx)
		r, rok := rec.(*Record)
		if ok && rok && c != nil && c.owned {
			c.like = r
		}
	})
}

// clientOwned reports whether r carries a mark that still holds.
func (r *Record) clientOwned() bool {
	o := &r.owned
	return o.by == r && o.sum == r.BodySHA && len(o.body) == len(r.Body) &&
		(len(r.Body) == 0 || &o.body[0] == &r.Body[0])
}
