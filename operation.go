package idem

import (
	"slices"
	"strings"
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
	// ReviewKeyExpired: the key window passed before the outcome was
	// confirmed; resending could execute it twice.
	ReviewKeyExpired = "key expired"
	// ReviewDeadlinePassed: the reconciliation deadline passed. Set only
	// on an operation not flagged yet, and it sends nothing: one nothing
	// of ours executed for (never sent, or every send answered as not
	// executed) is still not ours to settle by an event carrying its key
	// (ReviewKeyInUse).
	ReviewDeadlinePassed = journal.ReviewDeadlinePassed
	// ReviewKeyInUse: another request used the key (the server replayed
	// its stored answer to the first of our requests that could reach it,
	// or said the key was in flight, or only that it was already used,
	// before anything of ours could have executed: that request may be a
	// copy of ours a mesh sent), or this journal was lost and rebuilt, or
	// the result endpoint answered for the key an order or payment whose
	// side, symbol, quantity, price, amount or currency is not the
	// journaled request's (a client order id free again once an earlier
	// order under it filled), unless the operation was flagged
	// ReviewKeyIgnored, which it keeps (both block resends; only that one
	// tells a restarted process that the endpoint ignores the key; the
	// event that settles it after one send then flags it ReviewKeyInUse,
	// reading the query's attempt). What
	// the server holds for the key may be that request's: never taken as
	// ours. An event confirming it
	// (Confirm) settles it and keeps the flag, until Resolve: the event
	// finds it by the key, which that request's events carry too. An
	// event confirming an operation prepared and never sent, or pending
	// with every attempt answered as not executed (or so and flagged
	// ReviewDeadlinePassed since), flags it so: nothing of ours
	// executed. So does the server's answer, to a request of ours on the
	// wire while an event settled the operation, that another
	// request holds the key (its stored answer replayed, or the key
	// refused), or that it did not execute when no other attempt of ours
	// may have: the event may be that request's.
	ReviewKeyInUse = journal.ReviewKeyInUse
	// ReviewRefusedAfterSend: after an attempt that may have executed, the
	// server refused every resend; whether the first one executed is
	// unknown. Also set at once on a first attempt refused for the
	// resource's version (commercetools' 409 ConcurrentModification): a
	// copy of it a proxy retried may be what moved the version, and no
	// resend of the same bytes gets past the check; and on a payment's
	// first attempt refused "order already paid" (or a create's 409
	// "order already exists") by a server that keeps the key but checks
	// the order first: a copy of it a proxy sent may have paid (or made)
	// the order, and the result endpoint, asked by the key, did not
	// settle it.
	ReviewRefusedAfterSend = "server refuses resends of a request that may have executed"
	// ReviewClockStepped: a journaled time lies in the future, so the key
	// window cannot be measured: resending could reach a server that has
	// forgotten the key.
	ReviewClockStepped = "clock stepped back: the key window cannot be measured"
	// ReviewKeyNotCarried: a send would carry no key: this Client sends
	// the key in the body (WithKeyInBody), and the journaled body,
	// journaled with the key in a header (an earlier release's or
	// deploy's settings), does not carry it. Nothing sends it while the
	// Client's settings stay so, not even a first send of an operation
	// never sent (a mesh's retry of a keyless copy is a second order); one
	// that may have executed may still be queried.
	ReviewKeyNotCarried = "the journaled request would carry no idempotency key under this Client's settings (WithKeyInBody): every copy sent could execute"
	// ReviewKeyMoved: the operation was journaled by a Client that put
	// its key elsewhere (another header name, the other KeyFormat, the
	// body rather than a header or back) than the Client driving it: a
	// send would reach the server under another key, or none, and could
	// execute again. Nothing sends it from such a Client, not even a
	// first send; one that may have executed may still be queried. A
	// Client configured as it was journaled sends it again. One nothing
	// of ours executed for is still not ours to settle by an event
	// carrying its key (ReviewKeyInUse).
	ReviewKeyMoved = journal.ReviewKeyMoved
	// ReviewFinalAnswer: the server's stored answer for the key (a replay,
	// or a refusal naming only the resource the request acted on, as
	// Primer's refund's 409 names the payment refunded) leaves the
	// outcome open, and no result endpoint can settle it.
	ReviewFinalAnswer = "server's stored answer for the key does not settle it"
	// ReviewKeyIgnored: the server said it does not de-duplicate requests
	// by the key there (Idempotency-Status: ignored) in an answer that
	// leaves open whether the request executed, or an answer was lost
	// from an endpoint that said so earlier in the process, or an
	// operation whose answers were lost before it said so was visited
	// since (or, after two such sends, is being settled by Confirm,
	// which then flags it ReviewMaybeTwice): a resend would be a second
	// request, so nothing resends it, not even Do.
	// A contradicting confirmation (Confirm) keeps it while the operation
	// is open; the confirmation that settles it then flags it
	// ReviewConfirmConflict, or, after more than one send that may have
	// executed, ReviewMaybeTwice, as does a result query's answer that
	// settles it; one that settles it after a single such send clears it.
	ReviewKeyIgnored = journal.ReviewKeyIgnored
	// ReviewMaybeTwice: an answer that settled the operation said the
	// server does not de-duplicate by the key there, and an earlier copy
	// of the request (idem's, or net/http's own resend) may have executed
	// too; or a confirmation (Confirm) or a result query's answer settled
	// an operation flagged ReviewKeyIgnored more than one send of which
	// may have executed: it tells of one copy, and the other may have
	// charged. The
	// settled outcome is kept; like ReviewConfirmConflict it flags a
	// succeeded or failed operation, and only Resolve clears it. It comes
	// before ReviewConfirmConflict and ReviewKeyInUse: a contradicting
	// confirmation, or the server's word that another request holds the
	// key, is recorded beside it and leaves it in place.
	ReviewMaybeTwice = journal.ReviewMaybeTwice
	// ReviewMadeTwice: the server had said it holds the operation, naming
	// the resource it made, and an answer to a resend with the same key
	// named another: it had lost the key, and both exist. Nothing resends
	// it again, not even Do; a confirmation that settles it (Confirm)
	// keeps the flag, and only Resolve clears it.
	ReviewMadeTwice = journal.ReviewMadeTwice
	// ReviewConfirmConflict: an external confirmation (Confirm) contradicts
	// the recorded outcome, which was kept. Unlike the others it may flag
	// a succeeded or failed operation, without changing its state (List
	// with Filter{Review: true}, not Open, shows those); nothing but
	// Resolve clears it.
	ReviewConfirmConflict = journal.ReviewConfirmConflict
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
	// Review: why a person must look at it; empty when none. Set on a
	// succeeded or failed operation, it says the State is disputed: a
	// failed one may have executed.
	Review    string
	Attempts  int       // HTTP exchanges so far (submits and result queries)
	Result    *Result   // nil until the server said something conclusive
	Created   time.Time // when it was journaled
	FirstSent time.Time // zero if never sent
	Updated   time.Time
	Settled   time.Time // zero while open
	NextDue   time.Time // when the reconciler looks at it next
	// Confirmations: the external confirmations recorded (Confirm), the
	// latest ones and the few older ones the outcome rests on, at most
	// journal.MaxConfirmations, oldest first.
	Confirmations []Confirmation
}

func (c *Client) newOperation(rec *journal.Record) *Operation {
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
		op.Result = c.newResult(rec)
	}
	op.Confirmations = slices.Clone(rec.Confirmations)
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
	tail := rec.Attempts[n-(maxAttemptEntries-keepFirstAttempts-1):]
	dropped := rec.Attempts[keepFirstAttempts : n-len(tail)]
	// What pastOf reads must survive compaction: whether an attempt may
	// have executed (a later refusal may then not fail the operation, and
	// a cancellation leaves it unknown), whether the server replayed its
	// final answer (never resend), whether another request held the key
	// first (never take a success for it as ours), and how many refusals
	// came after a send that may have executed (the third leaves the
	// operation for a person: refusals far apart in a long history of
	// waits must not be forgotten, or it is resent past the third). Keep,
	// from the dropped middle, the last attempt that may have executed (or
	// else one more of the latest), the last replayed one (queries after a
	// replay can outnumber the entries kept), the first 409 that contested
	// the key, the last maxRefusalsAfterSend refusals that counted, and,
	// for them to count again, the first attempt that may have executed
	// when the first entries hold none (with the last one, two sends: to
	// a server that ignores the key, Confirm reads two as two charges
	// possible, journal.ApplyConfirmation), and the last query that found
	// another request's result under the key (journal.FoundOther: an
	// event carrying the key may be that request's, and must not settle
	// the operation unflagged once hourly rechecks have pushed the query
	// into the middle). Up to seven entries over the bound (eight kept
	// from the middle beside the 63 first and latest), only for such
	// histories.
	var p past
	for _, a := range kept {
		p = p.after(a)
	}
	executedBefore := p.maybeExecuted
	keep := map[int]journal.Attempt{}
	last := dropped[len(dropped)-1]
	replayed, contested, firstExecuted, foundOther := -1, -1, -1, -1
	var refusals []int
	for i, a := range dropped {
		if contested < 0 && contesting(a, p) {
			contested = i
		}
		if maybeExecuted(a) {
			last = a
			if firstExecuted < 0 {
				firstExecuted = i
			}
		}
		if a.Replayed {
			replayed = i
		}
		if a.Kind == journal.AttemptQuery && strings.HasPrefix(a.Err, journal.QueryFoundOther) {
			foundOther = i
		}
		next := p.after(a)
		if next.refusals > p.refusals {
			refusals = append(refusals, i)
		}
		p = next
	}
	keep[last.Number] = last
	if len(refusals) > maxRefusalsAfterSend {
		refusals = refusals[len(refusals)-maxRefusalsAfterSend:]
	}
	if executedBefore {
		firstExecuted = -1
	}
	for _, i := range append(refusals, replayed, contested, firstExecuted, foundOther) {
		if i >= 0 {
			keep[dropped[i].Number] = dropped[i]
		}
	}
	middle := make([]journal.Attempt, 0, len(keep))
	for _, a := range keep {
		middle = append(middle, a)
	}
	slices.SortFunc(middle, func(a, b journal.Attempt) int { return a.Number - b.Number })
	out := make([]journal.Attempt, 0, len(kept)+len(middle)+len(tail))
	out = append(out, kept...)
	out = append(out, middle...)
	rec.Attempts = append(out, tail...)
}
