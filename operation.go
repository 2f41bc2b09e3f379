package idem

import (
	"math"
	"time"

	"github.com/idemkit/idem/journal"
)

// State is where an operation stands; see the package documentation for the
// state diagram. Only StateSucceeded and StateFailed are terminal.
type State = journal.State

// The states of an operation.
const (
	StatePending    = journal.StatePending
	StateProcessing = journal.StateProcessing
	StateSucceeded  = journal.StateSucceeded
	StateFailed     = journal.StateFailed
	StateUnknown    = journal.StateUnknown
)

// Review reasons: why an open operation needs a person. Automatic
// reconciliation stops resending such an operation; it may still query.
const (
	ReviewKeyExpired     = "key expired"
	ReviewDeadlinePassed = "reconciliation deadline passed"
)

// Operation is a snapshot of one journaled operation.
type Operation struct {
	Scope     string
	Key       string
	Ref       string
	Method    string
	URL       string
	ResultURL string
	State     State
	Review    string    // why a person must look at it; empty when none
	Attempts  int       // HTTP exchanges so far (submits and result queries)
	Result    *Result   // nil until the server said something conclusive
	Created   time.Time // when it was journaled
	FirstSent time.Time // zero if never sent
	Updated   time.Time
	Settled   time.Time // zero while open
	NextDue   time.Time // when the reconciler looks at it next
}

func newOperation(rec *journal.Record) *Operation {
	op := &Operation{
		Scope:     rec.Scope,
		Key:       rec.Key,
		Ref:       rec.Ref,
		Method:    rec.Method,
		URL:       rec.URL,
		ResultURL: rec.QueryURL,
		State:     rec.State,
		Review:    rec.Review,
		Attempts:  attemptCount(rec),
		Created:   rec.Created,
		FirstSent: rec.FirstSent,
		Updated:   rec.Updated,
		Settled:   rec.Settled,
		NextDue:   rec.NextDue,
	}
	if rec.Result != nil {
		op.Result = newResult(rec)
	}
	return op
}

// attemptCount is the number of the last attempt: older entries may have
// been compacted away, numbers never are.
func attemptCount(rec *journal.Record) int {
	if len(rec.Attempts) == 0 {
		return 0
	}
	return rec.Attempts[len(rec.Attempts)-1].Number
}

// maybeSent reports whether any submit may have reached the server: one was
// written, or one has no recorded outcome (the process stopped mid-attempt).
func maybeSent(rec *journal.Record) bool {
	return priorMaybeSent(rec, math.MaxInt)
}

// submitMaybeSent is the one test of whether an attempt may have reached
// the server, shared by maybeSent, priorMaybeSent and compactAttempts so
// that they can never disagree.
func submitMaybeSent(a journal.Attempt) bool {
	return a.Kind == journal.AttemptSubmit && (a.Wrote || !a.Done)
}

// maxAttemptEntries bounds a record's history: a long reconciliation must not
// grow it without end. The first entries and the latest ones are kept.
const (
	maxAttemptEntries = 64
	keepFirstAttempts = 16
)

func compactAttempts(rec *journal.Record) {
	n := len(rec.Attempts)
	if n <= maxAttemptEntries {
		return
	}
	kept := rec.Attempts[:keepFirstAttempts]
	dropped := rec.Attempts[keepFirstAttempts : n-(maxAttemptEntries-keepFirstAttempts-1)]
	// "Maybe sent" must survive compaction: it decides whether a later
	// refusal may fail the operation and whether a cancellation leaves it
	// pending. Keep the last dropped attempt that may have been sent, or
	// else one more of the latest.
	keep := dropped[len(dropped)-1]
	for i := len(dropped) - 1; i >= 0; i-- {
		if a := dropped[i]; submitMaybeSent(a) {
			keep = a
			break
		}
	}
	out := make([]journal.Attempt, 0, maxAttemptEntries)
	out = append(out, kept...)
	out = append(out, keep)
	out = append(out, rec.Attempts[n-(maxAttemptEntries-keepFirstAttempts-1):]...)
	rec.Attempts = out
}
