package idem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/recordable"
	"github.com/idemkit/idem/journal"
)

// Confirmation is an outcome learned outside the client's own exchanges,
// typically a provider's webhook event, given to Confirm:
//
//	c := idem.Confirmation{
//		State:      idem.StateSucceeded,
//		ResourceID: event.Data.Object.ID, // "pi_3Nx…"
//		Source:     "stripe-webhook",
//		EventID:    event.ID, // "evt_1Nx…": a redelivery changes nothing
//		Reason:     event.Type, // "payment_intent.succeeded"
//	}
//
// The event must name the resource the operation's own answer names: for
// an operation that creates a PaymentIntent, payment_intent events (a
// charge.succeeded names its Charge, "ch_…", another resource id, and
// would flag the operation for review; a refund or a dispute is another
// object too, whatever key its metadata holds). And it must say a state
// that object never leaves: payment_intent.succeeded (StateSucceeded) or
// payment_intent.canceled (StateFailed), not payment_intent.payment_failed,
// which says one attempt failed: the intent is back in
// requires_payment_method and the customer may still pay it
// (https://docs.stripe.com/payments/paymentintents/lifecycle). A failure
// settles at once and fires the Settle hook: offering a new payment then
// would make a second one when the first intent succeeds. Confirm only
// what ends the operation's own object; leave attempts, pending states and
// other objects' events unconfirmed (ExampleClient_Confirm_attemptFailed).
//
// State (StateSucceeded or StateFailed), Source and EventID are required,
// and they and ResourceID are ids: valid UTF-8 without control characters;
// (Source, EventID) names the event, so the same event delivered twice
// changes nothing. At and Effect are set when it is recorded (At from the
// client's clock, as Settled: a provider's clock does not decide when an
// operation is pruned) and shown in Operation.Confirmations; Confirm
// ignores what the caller puts there, and in KeyInUse, which only a
// server's answer to a call (ResponseSource) sets.
type Confirmation = journal.Confirmation

// ErrConfirmConflict: a confirmation contradicts the operation's recorded
// outcome (succeeded against failed, or another resource id). The
// recorded outcome is kept, never overwritten; the operation is flagged
// for review (ReviewConfirmConflict; a ReviewKeyInUse or
// ReviewMaybeTwice, or an open operation's ReviewMadeTwice or
// ReviewKeyIgnored, is kept) and
// Hooks.ConfirmConflict is called.
// The error also matches journal.ErrConfirmConflict.
var ErrConfirmConflict = errors.New("idem: confirmation contradicts the recorded outcome")

// Confirm settles an operation from an external confirmation, such as a
// provider's webhook event, and records it in the journal with its source
// and event id. Nothing is sent. An empty scope is the client's default
// (WithScope).
//
//   - An open operation (pending, processing, unknown, flagged for review
//     or not) becomes succeeded or failed as c says, and nothing more is
//     ever sent for it: a call in flight for it (Do, Resume, Run) finds
//     the settled record at its next journal write, which precedes every
//     resend, stops, and reports the confirmed outcome. The settle hook
//     (Hooks.Settle) and the settle func (WithSettleFunc) are called once,
//     here. Its review reason is cleared, except ReviewConfirmConflict
//     (an earlier confirmation's contradiction), ReviewMadeTwice (the
//     server made a second resource for the key) and ReviewKeyInUse
//     (another request used the key, and its events carry the key too):
//     they stay until Resolve. ReviewKeyIgnored becomes ReviewMaybeTwice,
//     kept until Resolve, when more than one send of the operation may
//     have executed: the server took each for a new request, and the
//     event tells of one (before an earlier contradiction's
//     ReviewConfirmConflict, which stays recorded beside it); after one
//     send, ReviewKeyInUse if a result query found another request's
//     result under the key (journal.QueryFoundOther): the event may be
//     that request's. One not flagged yet whose endpoint the Client
//     knows ignores the key (learnt from another operation's answer, or
//     by an earlier process, from the journal's flagged operations) is
//     flagged ReviewKeyIgnored first, as the drive that visited it would
//     have, when more than one of its sends may have executed: it
//     settles ReviewMaybeTwice. If the confirmation then fails, that
//     flag stays, and Hooks.Review is called for it here: the
//     redelivery finds the operation flagged.
//   - An operation already settled the same way (same state, and the same
//     resource id or none in c): the confirmation is recorded, nothing
//     else changes, and Confirm returns its Result with a nil error. One
//     settled without a resource id (Resolve without one) is held to the
//     first such confirmation's that names one: another resource's event
//     after it is a contradiction (a second payment), not an agreement.
//   - A contradiction: the recorded outcome is kept, the operation is
//     flagged for review (a person settles it with Resolve; one flagged
//     ReviewKeyInUse keeps that reason, its settlement perhaps another
//     request's, one flagged ReviewMaybeTwice keeps that one, two
//     charges possible, and an open one flagged ReviewMadeTwice or
//     ReviewKeyIgnored keeps that one, never resent to a server that
//     lost or ignores its key; the confirmation that settles it later
//     turns ReviewKeyIgnored into ReviewConfirmConflict, or into
//     ReviewMaybeTwice after more than one send), the
//     confirmation is recorded beside it, Hooks.ConfirmConflict is called
//     (and Hooks.Review, for the first contradiction), and the error
//     matches ErrConfirmConflict.
//   - The same (Source, EventID) again: nothing changes, and Confirm
//     returns what it returned the first time.
//   - A pending operation with no attempt journaled (prepared, as an
//     outbox's intent is, and not sent yet), or none but attempts the
//     server answered as not executed (a 409 for a key another request
//     holds, a 429) while it waits to resend, or either flagged
//     ReviewDeadlinePassed since (nothing sent for that): settled as c
//     says and flagged ReviewKeyInUse (Hooks.Review fires, unless it was
//     flagged), since an attempt is journaled before it is sent: nothing
//     of ours executed, and the event is another request's that carried
//     the same key.
//
// Confirm returns the operation's Result (nil only with an error that
// matches none of ErrConfirmConflict), whose State says the outcome: a
// confirmed failure is not an error of Confirm's. Read its Review too: a
// failed Result with Review set (a flag the confirmation kept or set,
// ReviewMadeTwice, ReviewMaybeTwice or ReviewConfirmConflict) may have
// executed, and is no failure to offer again under a new key. A key the
// journal does
// not know gives an error matching ErrNotFound and journal.ErrNotFound,
// and nothing is created: an operation is journaled before its request
// is sent, so no event about it precedes its record; the key is not this
// journal's in this scope, or its record was pruned after it settled.
// Bad input gives ErrInvalidRequest. Any other error (the journal
// unreachable) means the event may not be recorded: have it delivered
// again (answer the provider's webhook with a 5xx, or keep it queued),
// never drop it; the redelivery is harmless. A commit whose answer was
// lost (journal.ErrMaybeCommitted) is read back first: if it took
// effect, Confirm returns as if it had answered, hooks called. A write
// under way, and that read, is finished even if ctx ends (the provider
// stopped waiting for the handler), so that it is never left half-known.
func (c *Client) Confirm(ctx context.Context, scope, key string, conf Confirmation) (*Result, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	scope = c.scopeOr(scope)
	if err := validConfirmation(key, &conf); err != nil {
		return nil, err
	}
	conf.At = c.cfg.clock.Now()
	// Written, and read back, with a context the caller's cancellation
	// does not end, as a drive's writes are: a provider that stops
	// waiting for the webhook handler (net/http then ends the request's
	// context) must not leave the write half-known, committed with nobody
	// told. The Store bounds its own calls (pgjournal's WithCallTimeout).
	wctx := context.WithoutCancel(ctx)
	var prior, marked, rec *journal.Record
	var err error
	if rerr := unlessFlaggedSinceRead(func() (*journal.Record, error) {
		var err error
		prior, marked, err = c.beforeConfirm(ctx, wctx, scope, key)
		return cmp.Or(marked, prior), err
	}, func(unless bool) error {
		rec, err = c.store.Confirm(wctx, scope, key, conf.UnlessFlaggedKeyIgnored(unless))
		return err
	}); rerr != nil {
		return nil, rerr
	}
	if rec == nil && errors.Is(err, journal.ErrMaybeCommitted) && !storeStalled(err) {
		rec, err = c.confirmedAfterAll(wctx, scope, key, &conf, err)
	}
	if rec == nil && marked != nil {
		// Flagged here and left open: the redelivery finds it flagged
		// and calls Settle only, so this call is the only one that can
		// tell of the flagging, as a drive's flag is told.
		c.flagged(ctx, c.newResult(marked))
	}
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return nil, fmt.Errorf("%w: Confirm: scope %q, key %q: nothing recorded, nothing created (does the event carry the key the request was sent with, in its metadata?): %w",
			ErrNotFound, scope, key, journal.ErrNotFound)
	case errors.Is(err, journal.ErrInvalid):
		return nil, fmt.Errorf("%w: Confirm: %w", ErrInvalidRequest, err)
	case errors.Is(err, journal.ErrFlaggedKeyIgnored):
		// Flagged by another drive after each of the two reads: rare, and
		// the redelivery reads the flag and journals its endpoint first.
		return nil, errorf("idem: Confirm (scope %q, key %q): flagged for an endpoint that ignores the key while this call ran, so nothing was written: "+
			"answer the provider with a retryable status (5xx) and its redelivery settles the operation: %w", scope, key, err)
	case rec == nil:
		return nil, errorf("idem: Confirm (scope %q, key %q): %w", scope, key, err)
	}
	res := c.newResult(rec)
	redelivered := errors.Is(err, journal.ErrExists)
	conflict := errors.Is(err, journal.ErrConfirmConflict)
	err = nil
	if conflict {
		err = fmt.Errorf("%w (scope %q, key %q): %w", ErrConfirmConflict, scope, key, journal.ErrConfirmConflict)
	}
	if redelivered || !conflict && recordedEffect(rec, &conf) != journal.ConfirmSettled {
		// A redelivery (the first delivery's answer again), or agreement
		// with what was settled already.
		return res, err
	}
	attrs := append(opAttrs(rec), slog.String("source", conf.Source), slog.String("event", conf.EventID))
	if conflict {
		c.log.LogAttrs(ctx, slog.LevelWarn, "idem: confirmation contradicts the recorded outcome; flagged for review",
			append(attrs, slog.String("confirmed_state", string(conf.State)), slog.String("confirmed_resource_id", conf.ResourceID))...)
		c.conflicted(ctx, res, conf, wasFlagged(prior, rec, &conf))
		return res, err
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "idem: settled by confirmation", attrs...)
	// As with a Run visit's settlement, nobody waits for this one: the
	// settle func learns of it too. Deferred, so that a Settle or Review
	// hook's panic (on its way up to the caller) does not skip it: the
	// event's redelivery changes nothing.
	if c.cfg.onSettle != nil {
		defer c.cfg.onSettle(res.clone())
	}
	if res.Review != "" && prior != nil && ignoredUnflagged(prior) && res.Review != prior.Review {
		// Settled and flagged at once: a never-sent operation's event is
		// another request's (journal.ApplyConfirmation), or sends to an
		// endpoint ignoring the key may have charged twice. ReviewKeyMoved
		// told a person of nothing of the kind (driveEnded). Deferred, so
		// that it still runs after the Settle hook if that panics: the
		// redelivery finds the operation settled, and no later call
		// tells the person.
		defer c.flagged(ctx, res)
	}
	c.settled(ctx, res)
	return res, nil
}

// beforeConfirm reads the record Confirm settles (prior; nil if the
// journal has none), and readies it, as Confirm's doc says: flagged
// ReviewKeyIgnored first (marked, markIgnoredBeforeConfirm), or, so
// flagged already, its endpoint journaled. An error means nothing was
// written: the provider delivers the event again.
func (c *Client) beforeConfirm(ctx, wctx context.Context, scope, key string) (prior, marked *journal.Record, err error) {
	// Read the record before, whatever this Client knows: one flagged
	// ReviewKeyIgnored (by another replica on the journal, whose save of
	// the endpoint was lost to a kill or failed) has its endpoint
	// journaled before the flag is cleared (keepFlagged), the flag
	// perhaps the endpoint's one trace; one two of whose sends may have
	// executed, to an endpoint known to ignore the key, is flagged so
	// before it settles (markIgnoredBeforeConfirm); and Hooks.Review
	// fires only for an operation not flagged yet, as a contradiction
	// overwrites the review reason.
	prior, err = c.store.Get(ctx, scope, key)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		// Whether it is flagged, or its endpoint ignores the key, is
		// unread: settled, the flag or two charges would go unseen.
		// Nothing is written; the provider delivers the event again.
		return nil, nil, errorf("idem: Confirm (scope %q, key %q): %w", scope, key, err)
	}
	marked, err = c.markIgnoredBeforeConfirm(ctx, wctx, prior)
	if err != nil {
		return nil, nil, errorf("idem: Confirm (scope %q, key %q): %w", scope, key, err)
	}
	if prior != nil && prior.Review == ReviewKeyIgnored {
		// The endpoint is journaled before the flag is cleared, within
		// ctx and saveIgnoringTimeout; a wait or a write that fails
		// writes nothing: the provider delivers the event again.
		switch saving, err := c.keepFlagged(ctx, prior); {
		case saving:
			return nil, nil, errorf("idem: Confirm (scope %q, key %q): the endpoint it was flagged for is still being journaled, so nothing was written: answer the provider with a retryable status (5xx) and its redelivery settles the operation: %w", scope, key, err)
		case errors.Is(err, journal.ErrKeyIgnoringFull):
			return nil, nil, errorf("idem: Confirm (scope %q, key %q): the endpoint it was flagged for could not be journaled, the journal keeping as many as it can, so nothing was written and it stays flagged for review: "+
				"answer the provider with a retryable status (5xx), and once room is made (idem key-ignoring remove, ForgetKeyIgnoring) its redelivery settles it (Resolve too waits for that room): %w", scope, key, err)
		case errors.Is(err, journal.ErrInvalid):
			return nil, nil, errorf("idem: Confirm (scope %q, key %q): the endpoint it was flagged for is too long, or not valid UTF-8, to be journaled, so nothing was written and it stays flagged for review: "+
				"a redelivery cannot settle it; settle it by hand (Resolve): %w", scope, key, err)
		case err != nil:
			return nil, nil, errorf("idem: Confirm (scope %q, key %q): the endpoint it was flagged for could not be journaled, so nothing was written: answer the provider with a retryable status (5xx) and its redelivery settles the operation: %w", scope, key, err)
		}
	}
	return prior, marked, nil
}

// confirmedAfterAll reads the operation again after a Confirm whose
// commit may have taken effect (err: journal.ErrMaybeCommitted, as when
// the connection to PostgreSQL broke after the COMMIT was sent). If it
// did, the record holds conf as this call made it (its At is this call's
// clock reading), and Confirm goes on as if the commit had answered: the
// provider's redelivery of the event finds it recorded and changes
// nothing, so this call is the only one that can tell the settle hook and
// the settle func. Otherwise, or if the record cannot be read (readAgain),
// err. (Not after a write a WithCallTimeout-style bound ended: the
// database that did not answer it would hold the read as long.) The
// reads go on when ctx ends, within the attempt timeout: ctx is the
// webhook handler's, ended when the provider stopped waiting, and a
// read-back given up then would leave a committed confirmation told to
// nobody, which the redelivery of its event never changes.
func (c *Client) confirmedAfterAll(wctx context.Context, scope, key string, conf *Confirmation, err error) (*journal.Record, error) {
	cur, gerr := c.readAgain(wctx, wctx, scope, key)
	if gerr != nil {
		return nil, err
	}
	for i := range cur.Confirmations {
		r := &cur.Confirmations[i]
		if r.Source != conf.Source || r.EventID != conf.EventID || !r.At.Equal(conf.At) {
			continue
		}
		if r.Effect == journal.ConfirmConflicted {
			return cur, journal.ErrConfirmConflict
		}
		return cur, nil
	}
	return nil, err
}

// wasFlagged returns the review reason of the operation before conf's
// contradiction flagged it, as rec (the record conf's commit returned)
// and prior (read before that commit; nil if unknown) tell: prior's, or
// ReviewConfirmConflict if another event's contradiction committed
// between that read and conf's (its Confirm reported the flagging). A
// contradiction prior holds while not flagged was settled by Resolve
// since: it does not hide a new one. Without prior, "": reported as a
// new flagging.
func wasFlagged(prior, rec *journal.Record, conf *Confirmation) string {
	if prior == nil {
		return ""
	}
	if prior.Review != "" {
		return prior.Review
	}
	for i := range rec.Confirmations {
		r := &rec.Confirmations[i]
		if r.Effect == journal.ConfirmConflicted && (r.Source != conf.Source || r.EventID != conf.EventID) && recordedEffect(prior, r) == journal.ConfirmInvalid {
			return journal.ReviewConfirmConflict
		}
	}
	return ""
}

// recordedEffect is what the journal recorded for conf's event in rec.
func recordedEffect(rec *journal.Record, conf *Confirmation) journal.ConfirmEffect {
	for i := len(rec.Confirmations) - 1; i >= 0; i-- {
		if r := &rec.Confirmations[i]; r.Source == conf.Source && r.EventID == conf.EventID {
			return r.Effect
		}
	}
	return journal.ConfirmInvalid
}

// validConfirmation checks what the caller can fix, with messages that say
// how; the journal checks the rest (lengths) again.
func validConfirmation(key string, conf *Confirmation) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: Confirm: empty key: pass the idempotency key the event carries (put it in the request's metadata)", ErrInvalidRequest)
	case !conf.State.Terminal():
		return fmt.Errorf("%w: Confirm: State must be %s or %s, got %q (a confirmation settles; an event that says \"processing\" confirms nothing)", ErrInvalidRequest, StateSucceeded, StateFailed, conf.State)
	case strings.TrimSpace(conf.Source) == "" || strings.TrimSpace(conf.EventID) == "":
		return fmt.Errorf("%w: Confirm: Source and EventID are required: they make a redelivered event harmless", ErrInvalidRequest)
	}
	for _, f := range [...]struct{ name, v string }{{"Source", conf.Source}, {"EventID", conf.EventID}, {"ResourceID", conf.ResourceID}} {
		if !recordable.Name(f.v) {
			return fmt.Errorf("%w: Confirm: %s %q holds a control character or invalid UTF-8; pass the provider's id as it is, not the raw payload around it", ErrInvalidRequest, f.name, f.v)
		}
	}
	if !utf8.ValidString(conf.Reason) {
		return fmt.Errorf("%w: Confirm: Reason is not valid UTF-8", ErrInvalidRequest)
	}
	// A reason is for people, and a handler passing an event's whole
	// description would have its event refused: answered 5xx, as the
	// README says to, the provider redelivers it for days, each refused.
	conf.Reason = recordable.Clip(conf.Reason, recordable.MaxReason)
	conf.Effect, conf.KeyInUse = journal.ConfirmInvalid, false
	return nil
}

// LookupResource returns the open operation (pending, processing, unknown)
// whose recorded result names resourceID: for an event that carries the
// provider's object id but not the idempotency key. Only open operations
// are searched, so its cost grows with their number, not with the
// journal's size; an operation settled already needs no confirmation
// (look it up by key). An empty scope is the client's default (WithScope).
// It returns an error matching ErrNotFound when no open operation names
// resourceID. Prefer carrying the key in the provider's metadata: an
// operation whose response was lost has no resource id recorded.
func (c *Client) LookupResource(ctx context.Context, scope, resourceID string) (*Operation, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	if resourceID == "" {
		return nil, fmt.Errorf("%w: LookupResource: empty resource id", ErrInvalidRequest)
	}
	scope = c.scopeOr(scope)
	var found []*journal.Record
	err := c.store.ForEachOpen(ctx, func(r *journal.Record) error {
		if r.Scope == scope && r.Result != nil && r.Result.ResourceID == resourceID {
			found = append(found, r)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, errorf("idem: LookupResource: %w", err)
	case len(found) == 0:
		return nil, fmt.Errorf("%w: LookupResource: no open operation of scope %q names resource %q", ErrNotFound, scope, resourceID)
	case len(found) > 1:
		return nil, fmt.Errorf("%w: LookupResource: %d open operations of scope %q name resource %q (keys %q, %q, …): settle them by key",
			ErrInvalidRequest, len(found), scope, resourceID, found[0].Key, found[1].Key)
	}
	return c.newOperation(found[0]), nil
}

// setReview sets the record's review reason, or clears it (reason ""),
// unless a confirmation contradicted the record, or the server made a
// second resource for the key: that stays for a person, whatever the
// driver learns later, until Resolve. Nor does an expired key replace a
// reason that tells more (outlivesExpiry), nor does a key another request
// used replace ReviewKeyIgnored (keepsIgnored), nor ReviewKeyMoved any
// reason: it speaks of the Client visiting, and a Client on the
// journaled settings drives an operation flagged only for it as
// unflagged (movedHere), which must not undo what the operation itself
// earned (a deadline passed, a clock stepped).
func setReview(r *journal.Record, reason string) {
	r.Review = reviewAfter(r.Review, reason)
}

// reviewAfter is the review reason of a record flagged was ("": none)
// once setReview sets reason on it.
func reviewAfter(was, reason string) string {
	if journal.ReviewHeld(was) || reason == ReviewKeyExpired && outlivesExpiry(was) || keepsIgnored(was, reason) ||
		reason == ReviewKeyMoved && was != "" {
		return was
	}
	return reason
}

// keepsIgnored reports whether a record flagged was keeps it when reason
// is set: ReviewKeyIgnored against ReviewKeyInUse (a result query finding
// under the key what another request left, query_other_request). Both
// block resends; only ReviewKeyIgnored tells a restarted process that the
// endpoint ignores the key (keyIgnoring.relearn), without which the next
// lost answer there is resent as a second charge, and only it becomes
// ReviewMaybeTwice when what settles the operation tells of one of two
// sends. The query's finding stays in its attempt, which the confirmation
// that settles the operation after one send reads (journal.QueryFoundOther):
// the event may be that request's, and it flags the operation
// ReviewKeyInUse.
func keepsIgnored(was, reason string) bool {
	return was == ReviewKeyIgnored && reason == ReviewKeyInUse
}

// outlivesExpiry reports whether a record flagged for reason keeps it when
// its key expires (the client's window over, or the result endpoint's 410
// on a daily recheck): "key expired" would tell the person only that time
// ran out, and hide that the key's result may be another request's
// (ReviewKeyInUse), that a resend would charge again (ReviewKeyIgnored),
// that it may have executed twice (ReviewMaybeTwice), or that the
// journal's times cannot be trusted (ReviewClockStepped). Each of them
// blocks resends on its own (resendBlock; keyWindow for a clock stepped;
// a record settled for ReviewMaybeTwice is never sent again), so keeping
// it lets nothing be resent that the expiry would have stopped. Not
// ReviewRefusedAfterSend: only the expiry keeps an explicit Do from
// resending that one once the server has said it forgot the key.
func outlivesExpiry(reason string) bool {
	switch reason {
	case ReviewKeyInUse, ReviewKeyIgnored, ReviewMaybeTwice, ReviewClockStepped:
		return true
	}
	return false
}

// lateAnswerResult gives res the status and body of the server's answer
// to this call that met a confirmation or resolution settling the
// operation under it (lateAnswer). One that agreed fills a Result that
// has none: a webhook that settles a Stripe PaymentIntent while its
// create is on the wire must not cost the caller the answer's
// client_secret. One that contradicts a failure replaces what the record
// holds (a resolution keeps the last answer before it): the call ends in
// ErrNeedsReview, and the charge the answer names is what a person needs.
// The record keeps the settlement as it was made; only this call's
// Result carries the body.
func (d *driver) lateAnswerResult(res *Result) {
	ex := d.late
	if ex == nil || res == nil || res.State != d.rec.State {
		return
	}
	if !d.lateContradicts && (len(res.Body) > 0 || res.StatusCode != 0) {
		return
	}
	body := ex.body
	if len(body) > storedBodyBytes {
		body = body[:storedBodyBytes]
	}
	res.StatusCode, res.Body = ex.status, body[:len(body):len(body)]
}

// ResponseSource is the Source of the confirmation a call records when the
// server's own answer settles an operation that a confirmation or a manual
// resolution (Resolve) settled while the call was in flight: compared like
// any other, it is recorded if it agrees and flagged
// (ReviewConfirmConflict) if it contradicts. A "processing" answer (a
// 409 "in progress" for our key, a 202) to an operation settled failed
// is recorded as processing and flagged: the server is executing what
// the failure says never ran. One that names another resource than a
// settled success is recorded too, in the settled state with its own
// resource id, and flagged. So is, as processing, an answer that tells
// nothing (lost, a gateway's 5xx) to an attempt that may have executed,
// against a failure: that attempt was sent while the failure was decided.
// One that says another request holds the key (its stored answer
// replayed to ours, a refusal of the key) is recorded in the settled
// state, without a resource id, KeyInUse, and flags the operation
// ReviewKeyInUse: the event that settled it, found by the key, may be
// that request's, and ours never made. So is one that says the request
// did not execute (the key's request still running, a 429) against a
// success, when no other attempt of ours may have executed: the success
// is another request's.
const ResponseSource = "idem: server response"

// lateAnswer handles an answer whose commit found the operation
// settled by a confirmation or by a person (Resolve) while the request
// was on the wire (err is the commit's; query: it answers a result
// query, which executes nothing): the answer is not lost but
// checked against that outcome, which it never replaces, so that a
// contradiction reaches a person. A person who resolved an operation as
// failed while a resend of it was executing has not seen the order the
// server then reports. So has an event that named another order made
// with our key (a provider that does not check the reference the key
// travels in): our own answer, even "processing", names ours. So has an
// event of another request that used our key (a second service deriving
// keys from the same order ids), which the answer then tells: the server
// replays that request's answer, or refuses the key.
func (d *driver) lateAnswer(err error, st step, number int, ex exchange, query bool) {
	if !errors.Is(err, errSettledElsewhere) || d.rec.Resolved == nil && len(d.rec.Confirmations) == 0 {
		return
	}
	// An answer that this attempt did not execute (a 409 for the key
	// another request still holds, a 429), when no other attempt of ours
	// may have: nothing of ours ran, so the success an event settled it
	// with, found by the key, is another request's, as ApplyConfirmation
	// reads an event that came before the answer.
	othersOnly := st.conflict || !query && st.refused && st.move != moveSettle && d.rec.State == StateSucceeded &&
		!slices.ContainsFunc(d.rec.Attempts, func(a journal.Attempt) bool { return a.Number != number && a.MaybeExecuted() })
	answer, said, state := "the server's answer", st.out.State, st.out.State
	switch {
	case st.conflict && d.rec.State == StateFailed && st.move == moveSettle && st.out.State == StateFailed:
		// A refusal, stored for the key or of ours: whoever ran first
		// failed and nothing ran after it, so the failure holds, whose
		// ever the event was.
		return
	case othersOnly:
		// Whatever it names is the other request's, never compared
		// with ours: it says only that the key is not ours alone.
		answer, said, state = "the server's answer that another request holds the key", StateUnknown, d.rec.State
		if !st.conflict {
			answer = "the server's answer that nothing of ours executed"
		}
		st.out.ResourceID = ""
	case st.move == moveSettle:
	case st.move == moveProcessing && d.rec.State == StateFailed:
		// The server holds the request and is executing it (a 409 "in
		// progress", a 202): what it executes may charge, whatever the
		// failure settled by hand or by an event says.
		answer, said, state = "the server's processing answer", StateProcessing, StateProcessing
	case !query && !st.refused && (ex.wrote || !ex.unsent) && d.rec.State == StateFailed:
		// Lost, or a gateway's error: the request may have executed, and
		// it was sent while the failure was decided, which cannot have
		// counted it (a person who found nothing sent, an event about
		// another payment). Nothing may resend or query a settled
		// operation: a person must find out.
		answer, said, state = "an attempt that may have executed, whose answer told nothing", StateUnknown, StateProcessing
	case st.move == moveProcessing:
		// It settles nothing: only another resource than the settled
		// one says something, and only that is compared.
		if d.rec.Result == nil || d.rec.Result.ResourceID == "" || st.out.ResourceID == "" || st.out.ResourceID == d.rec.Result.ResourceID {
			return
		}
		answer, said, state = "the server's processing answer", StateProcessing, d.rec.State
	default:
		return
	}
	reason := answer + ", after a confirmation settled it"
	if d.rec.Resolved != nil {
		reason = answer + ", after a manual resolution settled it"
	}
	conf := Confirmation{
		State: state, ResourceID: st.out.ResourceID, StatusCode: ex.status,
		Source: ResponseSource, EventID: "attempt " + strconv.Itoa(number), At: d.now(),
		Reason: reason, KeyInUse: othersOnly,
	}
	prior := d.rec
	rec, cerr := d.c.store.Confirm(d.wctx, d.rec.Scope, d.rec.Key, conf)
	if rec != nil {
		d.rec = rec
	}
	if cerr == nil && st.move == moveSettle && rec != nil && rec.State == st.out.State {
		d.late = &ex // a copy: only this rare path may put the exchange on the heap
	}
	if !errors.Is(cerr, journal.ErrConfirmConflict) || errors.Is(cerr, journal.ErrExists) {
		return
	}
	if !othersOnly && (d.rec.State == StateFailed || conf.State == StateFailed) {
		// The answer names what a person needs; not one that is the
		// other request's.
		d.late, d.lateContradicts = &ex, true
	}
	d.c.log.LogAttrs(d.ctx, slog.LevelWarn, "idem: the server's answer contradicts how the operation was settled (a confirmation or a manual resolution); flagged for review",
		append(opAttrs(d.rec), slog.Int("attempt", number), slog.String("answer_state", string(said)), slog.String("answer_resource_id", conf.ResourceID))...)
	d.c.conflicted(d.hctx, d.c.newResult(d.rec), conf, wasFlagged(prior, d.rec, &conf))
}
