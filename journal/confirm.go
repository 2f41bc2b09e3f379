package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/recordable"
)

// ErrConfirmConflict is matched by the error of a confirmation that
// contradicts what the record already says (succeeded against failed, or
// another resource id). The recorded outcome is kept; the record is
// flagged for review (ReviewConfirmConflict) and the confirmation is kept
// beside it, so a person sees both.
var ErrConfirmConflict = errors.New("journal: confirmation contradicts the recorded outcome")

// ReviewConfirmConflict is the review reason ApplyConfirmation sets on a
// record that a confirmation contradicted.
const ReviewConfirmConflict = "an external confirmation contradicts the recorded outcome"

// ReviewMadeTwice is the review reason of a record whose server had said
// it holds the operation, naming the resource it made (processing: a 202
// with the payment's id), and then answered a resend with the same key
// naming another, replayed or not: its idempotency store had lost the key,
// and both exist. The attempt's error names both. An answer that settles
// the record settles it, flagged; otherwise it stays open with the first
// resource. A confirmation that settles the record keeps the flag, as it
// keeps ReviewConfirmConflict: it says nothing of the other resource.
const ReviewMadeTwice = "server made another resource for a resend of the key it had said it holds: it lost the key, and the request executed twice"

// ReviewKeyIgnored is the review of an operation whose endpoint said it
// does not de-duplicate requests by the key (the client's ReviewKeyIgnored
// says when it is set): it is never resent, and a new process learns the
// endpoint again from the open operations flagged so. A confirmation (or
// the client's result query) that settles it clears it only if at most
// one copy of its request may have executed (SentTwice): else it flags the
// record ReviewMaybeTwice.
const ReviewKeyIgnored = "server ignores the idempotency key here: a resend could execute the request again"

// ReviewMaybeTwice is the review of a settled record whose server does
// not de-duplicate by the key, after more than one copy of the request
// may have executed: the answer or the event that settled it tells of
// one, and the other may have charged too (the client's ReviewMaybeTwice
// says when it is set).
const ReviewMaybeTwice = "server ignores the idempotency key here, and an earlier copy of the request may have executed too: it may have executed twice"

// ReviewKeyInUse is the review of an operation whose key another request
// used: what the server holds for the key may be that request's (the
// client's ReviewKeyInUse says when it is set).
const ReviewKeyInUse = "key used by another request: the server's answer for it may not be ours"

// ReviewDeadlinePassed is the review of an open record the client
// stopped reconciling when its deadline passed (the client's
// ReviewDeadlinePassed), set only on a record not flagged yet: it tells
// of the time the record waited, not of anything a server answered, and
// sends nothing. Such a record with no attempt that may have executed is
// as never sent as a pending one (ApplyConfirmation).
const ReviewDeadlinePassed = "reconciliation deadline passed"

// ReviewKeyMoved is the review of an open record a client that puts the
// key elsewhere than the record's KeyPlacement visited (the client's
// ReviewKeyMoved): it sends nothing, and set only on a record not
// flagged yet. Like ReviewDeadlinePassed, such a record with no attempt
// that may have executed is as never sent as a pending one
// (ApplyConfirmation).
const ReviewKeyMoved = "the operation was journaled with its idempotency key in another place (header name or form, or the body) than this Client puts it: every copy sent could execute again"

// ReviewHeld reports whether reason is a review that stays for a person,
// whatever settles or answers the record after it, until Resolve:
// ReviewConfirmConflict (the later event or answer agreeing with our
// resource does not explain the other's), ReviewMadeTwice (nothing
// later says what became of the other resource) and ReviewMaybeTwice
// (nothing later says whether the other copy charged). Every writer of a
// review asks it, so that a reason added to the list holds everywhere.
func ReviewHeld(reason string) bool {
	return reason == ReviewConfirmConflict || reason == ReviewMadeTwice || reason == ReviewMaybeTwice
}

// MaxConfirmations bounds the confirmations a record keeps: the latest
// ones, each of a distinct (Source, EventID), but for the few older ones
// its outcome rests on (the one that settled it, the one that named its
// resource, the first failure that disputes its success), kept in their
// place. A provider redelivers an
// event for days; an operation does not collect many distinct events.
const MaxConfirmations = 16

// Limits on a confirmation's fields, so that an event from outside cannot
// bloat a record that every later write rewrites.
const (
	maxConfirmID         = recordable.MaxID         // Source, EventID
	maxConfirmResourceID = recordable.MaxResourceID // ResourceID
	maxConfirmReason     = recordable.MaxReason     // Reason
)

// ConfirmEffect is what a confirmation did to a record.
type ConfirmEffect uint8

// The effects of a confirmation.
const (
	// ConfirmInvalid: refused (bad input); nothing changed.
	ConfirmInvalid ConfirmEffect = iota
	// ConfirmSettled: it settled an open record.
	ConfirmSettled
	// ConfirmAgreed: the record was already settled so; the confirmation
	// is recorded, nothing else changed.
	ConfirmAgreed
	// ConfirmConflicted: it contradicts the record, which keeps its state
	// and is flagged for review.
	ConfirmConflicted
	// ConfirmDuplicate: the same (Source, EventID) was already recorded;
	// nothing changed.
	ConfirmDuplicate
)

// Changed reports whether the record must be written.
func (e ConfirmEffect) Changed() bool {
	return e == ConfirmSettled || e == ConfirmAgreed || e == ConfirmConflicted
}

func (e ConfirmEffect) String() string {
	switch e {
	case ConfirmSettled:
		return "settled"
	case ConfirmAgreed:
		return "agreed"
	case ConfirmConflicted:
		return "conflicted"
	case ConfirmDuplicate:
		return "duplicate"
	}
	return "invalid"
}

// Confirmation is an outcome learned outside the client's own exchanges: a
// provider's webhook event, a settlement report, a message from another
// system. It is recorded in the record it confirms.
type Confirmation struct {
	// State is StateSucceeded or StateFailed, or StateProcessing for a
	// server's answer that it holds the request (still executing it),
	// which is recorded only against a failed record, as a contradiction:
	// what the server is executing may yet charge.
	State      State
	ResourceID string // the provider's id for what was created; may be empty
	// Source names where it came from ("stripe-webhook"); with EventID it
	// identifies the confirmation, so that a redelivered event changes
	// nothing.
	Source     string
	EventID    string    // the source's id for the event; required
	Reason     string    // for people: the event type, the decline reason; Client.Confirm cuts it to 1024 bytes
	StatusCode int       // a status the source reported, if any; 0 if none
	At         time.Time // when it was recorded, by the caller's clock; required (the Store never reads the clock)
	// KeyInUse says that the server answered a request of ours with the
	// key as held by another request (its stored answer replayed, or a
	// refusal of the key): what settled the record, found by the key,
	// may be that request's outcome, not ours. ApplyConfirmation flags
	// the record ReviewKeyInUse.
	KeyInUse bool
	// Effect is what it did, set by ApplyConfirmation when it is recorded.
	Effect ConfirmEffect
	// unlessKeyIgnored: UnlessFlaggedKeyIgnored's; never recorded.
	unlessKeyIgnored bool
}

// ErrFlaggedKeyIgnored is matched by the error of a confirmation or a
// manual resolution made UnlessFlaggedKeyIgnored against an open record
// flagged ReviewKeyIgnored: nothing was written.
var ErrFlaggedKeyIgnored = errors.New("journal: the record was flagged for an endpoint that ignores the key after the writer read it; nothing was written")

// FlaggedKeyIgnored reports whether rec is open and flagged
// ReviewKeyIgnored: a flag that may be all that tells a restarted
// process its endpoint ignores the key, which nothing may clear before
// that endpoint is journaled.
func FlaggedKeyIgnored(rec *Record) bool {
	return rec.Open() && rec.Review == ReviewKeyIgnored
}

// UnlessFlaggedKeyIgnored returns c made, if on, to settle nothing if
// the record is open and flagged ReviewKeyIgnored when the Store applies
// it (ApplyConfirmation: ErrFlaggedKeyIgnored), for a caller that read
// the record unflagged; if not on, applied whatever the flag, as a
// Confirmation is by default. The flag may be all that tells a
// restarted process its endpoint ignores the key (the process that set
// it killed before its save of the endpoint committed), and the
// confirmation would clear it: the caller journals the endpoint first,
// as it does for a flag it reads, and confirms again.
func (c Confirmation) UnlessFlaggedKeyIgnored(on bool) Confirmation {
	c.unlessKeyIgnored = on
	return c
}

// Validate reports what is wrong with c as input, or nil. Its errors
// match ErrInvalid.
func (c *Confirmation) Validate() error {
	switch {
	case !c.State.Terminal() && c.State != StateProcessing:
		return errorf("confirmation state %q: must be %s or %s (or %s, against a failure): %w", c.State, StateSucceeded, StateFailed, StateProcessing, ErrInvalid)
	case strings.TrimSpace(c.Source) == "" || strings.TrimSpace(c.EventID) == "":
		return errorf("confirmation without a Source or EventID (they make a redelivered event harmless): %w", ErrInvalid)
	case len(c.Source) > maxConfirmID || len(c.EventID) > maxConfirmID || len(c.ResourceID) > maxConfirmResourceID:
		return errorf("confirmation Source or EventID longer than %d bytes, or ResourceID longer than %d: %w", maxConfirmID, maxConfirmResourceID, ErrInvalid)
	case len(c.Reason) > maxConfirmReason:
		return errorf("confirmation Reason longer than %d bytes: %w", maxConfirmReason, ErrInvalid)
	case c.StatusCode < 0 || c.StatusCode > 999:
		return errorf("confirmation StatusCode %d: %w", c.StatusCode, ErrInvalid)
	case c.At.IsZero():
		return errorf("confirmation without a time: %w", ErrInvalid)
	}
	return nil
}

// same reports whether c and o are one event.
func (c *Confirmation) same(o *Confirmation) bool {
	return c.Source == o.Source && c.EventID == o.EventID
}

// ApplyConfirmation decides what confirmation c means for rec and applies
// it to rec. It is a pure function: every Store calls it inside its own
// transaction, on the record as stored, and writes rec back when the
// effect Changed.
//
//   - A (Source, EventID) rec already holds: ConfirmDuplicate, rec
//     untouched, and the error the first delivery got (nil, or one
//     matching ErrConfirmConflict).
//   - An open record (pending, processing, unknown, flagged for review or
//     not): ConfirmSettled, the state and result set as c says, the
//     review reason cleared unless it is ReviewConfirmConflict (an
//     earlier contradiction waits for Resolve), ReviewMadeTwice,
//     ReviewKeyInUse or ReviewMaybeTwice (ReviewHeld), or set to
//     ReviewMaybeTwice if it was ReviewKeyIgnored and more than one send
//     may have executed (whatever c or a contradiction recorded before
//     says: two charges possible comes first), or else to
//     ReviewConfirmConflict if a contradiction is recorded (one that kept
//     ReviewKeyIgnored); a pending record with no attempt that may have
//     executed (Attempt.MaybeExecuted: none, or only ones answered as
//     not executed, none on the wire), or an unknown one so flagged
//     ReviewDeadlinePassed, is flagged ReviewKeyInUse, and so
//     is one flagged ReviewKeyIgnored after one send whose result query
//     found another request's result under the key (QueryFoundOther). A
//     processing result that named another resource id is a
//     contradiction (below).
//   - A settled record with c's state and resource id (or c without
//     one): ConfirmAgreed, c recorded, nothing else changed. A record
//     settled without a resource id takes the first agreeing one's that
//     names one as its own (resourceOf): another resource after it is a
//     contradiction.
//   - c processing (the server's answer that it holds the request): a
//     contradiction of a failed record; refused (ConfirmInvalid) for any
//     other.
//   - c KeyInUse against a settled record that it does not otherwise
//     contradict: ConfirmConflicted and an error matching
//     ErrConfirmConflict; the state and result are kept, c is recorded
//     and the record flagged ReviewKeyInUse (unless a review held for a
//     person is set), which later confirmations keep until Resolve.
//     Against an open record, it settles it as any confirmation does,
//     flagged ReviewKeyInUse.
//   - A contradiction: ConfirmConflicted and an error matching
//     ErrConfirmConflict. The state and result are kept; c is recorded
//     and the record flagged ReviewConfirmConflict, unless it is flagged
//     ReviewKeyInUse or ReviewMaybeTwice, or is open and flagged
//     ReviewMadeTwice or ReviewKeyIgnored, which it keeps (none is
//     resent); an open ReviewKeyIgnored record so kept takes, when a
//     confirmation settles it, ReviewMaybeTwice after more than one send,
//     else ReviewKeyInUse if that confirmation says another request holds
//     the key or a result query found another request's result
//     (FoundOther), else ReviewConfirmConflict. This, and the recording
//     of c, are the only changes made to a terminal record other than
//     Resolve's.
//   - Bad input: ConfirmInvalid and an error matching ErrInvalid.
//   - c made UnlessFlaggedKeyIgnored against an open record flagged
//     ReviewKeyIgnored: ConfirmInvalid and an error matching
//     ErrFlaggedKeyIgnored, rec untouched.
//
// The record keeps the latest MaxConfirmations confirmations, and the
// few older ones its outcome rests on (trimConfirmations).
func ApplyConfirmation(rec *Record, c Confirmation) (ConfirmEffect, error) {
	if err := c.Validate(); err != nil {
		return ConfirmInvalid, err
	}
	c.At = c.At.UTC()
	for i := range rec.Confirmations {
		old := &rec.Confirmations[i]
		if !old.same(&c) {
			continue
		}
		if old.State != c.State || old.ResourceID != c.ResourceID {
			return ConfirmInvalid, errorf("confirmation %s/%s redelivered with another outcome (%s %q, first %s %q): an event id names one event: %w",
				c.Source, c.EventID, c.State, c.ResourceID, old.State, old.ResourceID, ErrInvalid)
		}
		if old.Effect == ConfirmConflicted {
			return ConfirmDuplicate, conflictErr(rec, &c)
		}
		return ConfirmDuplicate, nil
	}
	if flaggedSinceRead(c.unlessKeyIgnored, rec) {
		return ConfirmInvalid, errorf("confirmation %s/%s: %w", c.Source, c.EventID, ErrFlaggedKeyIgnored)
	}
	c.unlessKeyIgnored = false
	if c.State == StateProcessing && rec.State != StateFailed {
		// It settles nothing, and only a failure does it contradict.
		return ConfirmInvalid, errorf("confirmation state %s against a %s record: only a failure is contradicted by it: %w", c.State, rec.State, ErrInvalid)
	}
	known := resourceOf(rec)
	otherID := c.ResourceID != "" && known != "" && c.ResourceID != known
	var err error
	switch {
	case otherID || (rec.State.Terminal() && rec.State != c.State):
		c.Effect = ConfirmConflicted
		switch {
		case rec.Review == ReviewKeyInUse:
			// A key another request used stays the reason: the
			// settlement may be that request's, whatever else contradicts
			// it, and a contradiction naming another resource, read as
			// saying nothing of the settled one, would make a success
			// that may not be ours look like one.
		case rec.Review == ReviewMaybeTwice:
			// Two charges possible is what a person must not miss: the
			// contradiction (another payment's event, a decline of the
			// one settled) is recorded beside it, the error and the
			// ConfirmConflict hook tell of it, and the client reads a
			// recorded failure against a success (failureAgainst) as
			// ReviewConfirmConflict's. Replaced, the reason would say
			// only that an event disagreed, and the person could settle
			// the one payment told of and leave the other charge.
		case !rec.State.Terminal() && (rec.Review == ReviewMadeTwice || rec.Review == ReviewKeyIgnored):
			// An open record whose server lost the key once, or ignores
			// it, is never resent, and the client knows it by this reason
			// (and learns again from it, after a restart, that the
			// endpoint ignores keys): an event about another resource
			// must not lift it. A settlement turns it into the
			// contradiction's.
		default:
			rec.Review = ReviewConfirmConflict
		}
		err = conflictErr(rec, &c)
	case rec.State.Terminal() && c.KeyInUse:
		// The settlement may be the other request's: an event finds the
		// operation by the key, and that request's events carry it too.
		c.Effect = ConfirmConflicted
		if !ReviewHeld(rec.Review) {
			rec.Review = ReviewKeyInUse
		}
		err = errorf("confirmation %s/%s says another request holds the key: the journal's %s may be that request's: kept it, flagged for review: %w",
			c.Source, c.EventID, rec.State, ErrConfirmConflict)
	case rec.State.Terminal():
		c.Effect = ConfirmAgreed
	default:
		c.Effect = ConfirmSettled
		// An attempt is journaled before it is sent, and a record stays
		// pending only while nothing of ours may have executed: with no
		// attempt, or none but those an answer said did not execute (a
		// 409 for a key another request holds, a 429, a request never
		// written) and none on the wire, an event carrying the key is
		// another request's. So it is once flagged, unknown, for the
		// time it waited alone: the reconciliation deadline passed on an
		// intent a relay stopped for days never sent, or a client on
		// other key settings visited it (ReviewKeyMoved), which no
		// answer flagged first. Not after a flag an answer set: a first
		// attempt's refusal that a copy of it a proxy sent may explain
		// (the client's ReviewRefusedAfterSend) may have been ours.
		neverSent := (rec.State == StatePending || rec.State == StateUnknown && (rec.Review == ReviewDeadlinePassed || rec.Review == ReviewKeyMoved)) &&
			!slices.ContainsFunc(rec.Attempts, Attempt.MaybeExecuted)
		res := rec.result()
		if c.ResourceID != "" {
			res.ResourceID = c.ResourceID
		}
		if c.StatusCode != 0 {
			res.StatusCode = c.StatusCode
		}
		res.Reason = c.Reason
		if res.Reason == "" {
			res.Reason = "confirmed by " + c.Source + " event " + c.EventID
		}
		res.Replayed = false
		rec.State = c.State
		// A contradiction stays for a person (Resolve) whatever settles
		// the record after it: this event agreeing with our resource
		// does not explain the other event's, nor the other resource a
		// server made for the key. So does a key another request used:
		// an event finds the operation by the key, and that request's
		// events carry it too.
		if !ReviewHeld(rec.Review) && rec.Review != ReviewKeyInUse {
			ignored := rec.Review == ReviewKeyIgnored
			rec.Review = ""
			switch {
			case ignored && SentTwice(rec):
				// The server took each send for a new request: the
				// event tells of one, and another may have charged.
				// Before a key another request holds (c KeyInUse) or a
				// contradiction recorded meanwhile, which stay readable
				// beside it (ReviewMaybeTwice's place among the reasons,
				// above).
				rec.Review = ReviewMaybeTwice
			case neverSent || c.KeyInUse || ignored && FoundOther(rec):
				rec.Review = ReviewKeyInUse
			case slices.ContainsFunc(rec.Confirmations, func(o Confirmation) bool { return o.Effect == ConfirmConflicted }):
				// A contradiction recorded under a flag that kept its
				// place while the record was open (ReviewKeyIgnored):
				// settled, the record is never sent again, and what is
				// left for a person is the contradiction.
				rec.Review = ReviewConfirmConflict
			}
		}
		rec.Settled = c.At
	}
	rec.Confirmations = append(rec.Confirmations, c)
	trimConfirmations(rec)
	if c.At.After(rec.Updated) {
		rec.Updated = c.At
	}
	return c.Effect, err
}

// QueryFoundOther begins the note (Attempt.Err) of a result query that
// found under the key another request's result (another amount, side or
// price than the journaled request's). The client flags the record
// ReviewKeyInUse then, unless it is flagged ReviewKeyIgnored, which it
// keeps (only that flag tells a restarted process that the endpoint
// ignores the key): the note is what is left of the finding, and the
// confirmation that settles such a record reads it (FoundOther). Keep it
// as written.
const QueryFoundOther = "idem: the result found under the key is another request's"

// FoundOther reports whether a result query of rec found another
// request's result under its key (QueryFoundOther): an event carrying the
// key may then be that request's, as with ReviewKeyInUse.
func FoundOther(rec *Record) bool {
	return slices.ContainsFunc(rec.Attempts, func(a Attempt) bool {
		return a.Kind == AttemptQuery && strings.HasPrefix(a.Err, QueryFoundOther)
	})
}

// SentTwice reports whether more than one copy of rec's request may
// have executed: two attempts that may have (Attempt.MaybeExecuted), or
// one that net/http sent twice (Attempt.Resent), its first copy written
// whole on a connection that died. To a server that ignores the key,
// those are two requests, of which one answer or one event tells:
// whatever settles a record flagged ReviewKeyIgnored (a confirmation, the
// client's result query) flags it ReviewMaybeTwice then, so that the one
// told of is not taken for all.
func SentTwice(rec *Record) bool {
	n := 0
	for _, a := range rec.Attempts {
		if !a.MaybeExecuted() {
			continue
		}
		n++
		if a.Resent {
			n++
		}
		if n > 1 {
			return true
		}
	}
	return false
}

// resourceOf is the resource id rec names: its result's, or, for a
// record settled without one, that of the first confirmation that agreed
// with it naming one. An event that names a resource settles nothing new
// there, but another resource's event after it is a second payment, not
// one more agreement.
func resourceOf(rec *Record) string {
	if rec.Result != nil && rec.Result.ResourceID != "" {
		return rec.Result.ResourceID
	}
	if i := resourceAnchor(rec); i >= 0 {
		return rec.Confirmations[i].ResourceID
	}
	return ""
}

// resourceAnchor is the index of the confirmation resourceOf reads, or -1.
func resourceAnchor(rec *Record) int {
	if !rec.State.Terminal() || rec.Result != nil && rec.Result.ResourceID != "" {
		return -1
	}
	return slices.IndexFunc(rec.Confirmations, func(c Confirmation) bool {
		return c.Effect == ConfirmAgreed && c.State == rec.State && c.ResourceID != ""
	})
}

// trimConfirmations bounds rec's confirmations to MaxConfirmations,
// dropping the oldest but those the record's meaning rests on: the one
// that settled it (Result.Confirmed), the one that names its resource
// (resourceOf), and the first contradicting failure of the result's
// resource or of none (which disputes a success: the client's
// failureAgainst). Dropped,
// a run of other events (a shopper's refused cards, each its own
// pspReference under one merchantReference) erased what disputes the
// success, and Do reported it paid.
func trimConfirmations(rec *Record) {
	cs := rec.Confirmations
	over := len(cs) - MaxConfirmations
	if over <= 0 {
		return
	}
	keep := make([]bool, len(cs))
	if i := slices.IndexFunc(cs, func(c Confirmation) bool { return c.Effect == ConfirmSettled }); i >= 0 {
		keep[i] = true
	}
	if i := resourceAnchor(rec); i >= 0 {
		keep[i] = true
	}
	// As the client's failureAgainst reads them: by the result's id.
	var known string
	if rec.Result != nil {
		known = rec.Result.ResourceID
	}
	if i := slices.IndexFunc(cs, func(c Confirmation) bool {
		return c.Effect == ConfirmConflicted && c.State == StateFailed && (known == "" || c.ResourceID == "" || c.ResourceID == known)
	}); i >= 0 {
		keep[i] = true
	}
	kept := make([]Confirmation, 0, MaxConfirmations)
	for i := range cs {
		if over > 0 && !keep[i] {
			over--
			continue
		}
		kept = append(kept, cs[i])
	}
	// More kept than fit cannot happen (three at most); the oldest go.
	rec.Confirmations = kept[max(0, len(kept)-MaxConfirmations):]
}

func conflictErr(rec *Record, c *Confirmation) error {
	return errorf("confirmation %s/%s says %s %q, the journal says %s %q: kept the journal's, flagged for review: %w",
		c.Source, c.EventID, c.State, c.ResourceID, rec.State, resourceOf(rec), ErrConfirmConflict)
}

// Confirm records confirmation c in the record and settles it, as
// ApplyConfirmation decides, atomically. It returns the record as stored
// and:
//   - nil when c settled the record or agreed with it;
//   - an error matching ErrExists, and the stored record, when c's
//     (Source, EventID) was already recorded: nothing was written (the
//     error also matches ErrConfirmConflict if the first delivery did);
//   - an error matching ErrConfirmConflict, and the record as stored
//     (flagged for review, its outcome kept), when c contradicts it;
//   - ErrNotFound when no record has that scope and key: nothing is
//     created;
//   - ErrInvalid, without a record, for bad input.
func (s *Store) Confirm(ctx context.Context, scope, key string, c Confirmation) (*Record, error) {
	if err := validateID(scope, key); err != nil {
		return nil, errorf("journal: confirm: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, errorf("journal: confirm %q: %w", key, err)
	}
	var effect ConfirmEffect
	var verdict error
	stored, err := s.rewrite(ctx, recordKey(scope, key), func(r *Record) (bool, error) {
		effect, verdict = ApplyConfirmation(r, c)
		return effect.Changed(), nil
	})
	switch {
	case err != nil:
		return nil, errorf("journal: confirm %q: %w", key, err)
	case effect == ConfirmDuplicate && verdict != nil:
		return stored, errorf("journal: confirm %q: event %s/%s already recorded (%w): %w", key, c.Source, c.EventID, ErrExists, verdict)
	case effect == ConfirmDuplicate:
		return stored, errorf("journal: confirm %q: event %s/%s already recorded: %w", key, c.Source, c.EventID, ErrExists)
	case effect == ConfirmInvalid:
		return nil, errorf("journal: confirm %q: %w", key, verdict)
	case verdict != nil:
		return stored, errorf("journal: confirm %q: %w", key, verdict)
	}
	return stored, nil
}

// rewrite reads the record under rk, lets change change it, and writes it
// back with its index entries, all in one transaction, unless change
// reports that it changed nothing; nothing is written when change fails.
// It returns the record as stored.
// change may run more than once (a retried round), each time on a fresh
// copy.
func (s *Store) rewrite(ctx context.Context, rk []byte, change func(*Record) (bool, error)) (*Record, error) {
	var stored *Record
	err := s.write(ctx, func(v *view, _ *request) error {
		stored = nil
		cur, err := v.get(rk)
		if err != nil {
			return err
		}
		if cur == nil {
			return ErrNotFound
		}
		r, err := decode(cur)
		if err != nil {
			return err
		}
		if changed, err := change(r); err != nil {
			return err
		} else if !changed {
			stored = r
			return nil
		}
		if err := validate(r); err != nil {
			return err
		}
		v.put(rk, r, encode(nil, r))
		stored = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return clone(stored), nil
}

// Confirmation encoding (record version 3), after the record's last time:
// a count, then per confirmation its state, resource id, source, event id,
// reason, status code, time and effect. From version 5, the effect byte's
// high bit is KeyInUse.
const keyInUseBit = 0x80

// appendConfirmations appends the record's confirmations.
func appendConfirmations(dst []byte, cs []Confirmation) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cs)))
	for i := range cs {
		c := &cs[i]
		dst = append(dst, stateCode(c.State))
		dst = appendString(dst, c.ResourceID)
		dst = appendString(dst, c.Source)
		dst = appendString(dst, c.EventID)
		dst = appendString(dst, c.Reason)
		dst = binary.AppendVarint(dst, int64(c.StatusCode))
		dst = appendTime(dst, c.At)
		effect := byte(c.Effect)
		if c.KeyInUse {
			effect |= keyInUseBit
		}
		dst = append(dst, effect)
	}
	return dst
}

// versionOf is the record version r is written in: 7 if it holds its
// key's placement (Record.KeyPlacement), 6 if it holds an
// attempt net/http resent (Attempt.Resent), 5 if it holds a KeyInUse
// confirmation, 4 if it holds a processing one, which version 3 cannot
// hold, else 3; so that an older build refuses what it cannot read as
// newer (ErrVersion) and still reads every other record.
func versionOf(r *Record) byte {
	if r.KeyPlacement != "" {
		return 7
	}
	for i := range r.Attempts {
		if r.Attempts[i].Resent {
			return 6
		}
	}
	v := byte(3)
	for i := range r.Confirmations {
		if r.Confirmations[i].KeyInUse {
			return 5
		}
		if r.Confirmations[i].State == StateProcessing {
			v = 4
		}
	}
	return v
}

// confirmations decodes what appendConfirmations wrote, in a version 3
// record or later.
func (d *decoder) confirmations() []Confirmation {
	if d.version < 3 {
		return nil
	}
	// An encoded confirmation is at least 9 bytes: state, four empty
	// strings, status, time (2) and effect.
	n := d.count(9)
	if n == 0 {
		return nil
	}
	cs := make([]Confirmation, n)
	for i := range cs {
		c := &cs[i]
		c.State = d.state()
		c.ResourceID = d.string()
		c.Source = d.string()
		c.EventID = d.string()
		c.Reason = d.string()
		c.StatusCode = d.int()
		c.At = d.time()
		effect := d.byte()
		if d.version >= 5 {
			c.KeyInUse, effect = effect&keyInUseBit != 0, effect&^keyInUseBit
		}
		c.Effect = ConfirmEffect(effect)
		// Only what Confirm records: a change, in a terminal state, or
		// (version 4 on) a processing answer that contradicted a failure.
		recorded := c.State.Terminal() || c.State == StateProcessing && c.Effect == ConfirmConflicted && d.version >= 4
		if d.err == nil && (!recorded || !c.Effect.Changed()) {
			d.fail("invalid confirmation")
		}
	}
	if d.err != nil {
		return nil
	}
	return cs
}
