package idem

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem/internal/errtext"
)

// Errors from Prepare, before anything is journaled or sent.
var (
	// ErrInvalidRequest: the Request cannot be journaled as given; the
	// message says which field to fix.
	ErrInvalidRequest = errors.New("idem: invalid request")
	// ErrSecretHeader: the Request carries a credential header
	// (Authorization, Cookie, Proxy-Authorization, X-Api-Key, Api-Key,
	// X-Auth-Token, or a name ending as API credentials' names do: -Api-Key,
	// -ApiKey, -Access-Key, -Auth-Key, -Subscription-Key, -Secret,
	// -Passphrase, -Password, -Token, -Cookie, -Authorization,
	// -Api-Key-Id; KuCoin's KC-API-PASSPHRASE, Binance's X-MBX-APIKEY; or
	// with Secret or Private as a part of it: Alpaca's
	// APCA-API-SECRET-KEY, Kushki's Private-Merchant-Id) or credentials
	// in its URL (user:password@, or a query parameter such as api_key or
	// access_token, or a signed URL's X-Amz-Signature, X-Amz-Credential,
	// X-Goog-Signature or Azure SAS sig; after '&' or ';', which some
	// servers read as '&'). Credentials are never
	// written to the journal: add them at send time with WithRequestHook or
	// with the http.Client's Transport. A request whose operation the
	// journal holds already under its key (journaled by a release that
	// accepted the credential) is not refused: it is driven as any
	// resubmission is. Another request under that key (another body,
	// say) is refused as a new one would be.
	ErrSecretHeader = errors.New("idem: credential header in a journaled request")
)

// Errors that describe an operation's outcome. Do and Submit wrap them in
// an *Error that also carries the key, the state and the attempts.
var (
	// ErrUnknownOutcome: the call ended (budget spent, context done, key
	// expired, retry budget empty) before the outcome was confirmed, or
	// the outcome the journal holds is contradicted (ErrNeedsReview). The
	// operation stays in the journal, due for Resume and Run or, flagged,
	// for a person (Resolve, which calls Hooks.Settle); never treat this
	// as a failure and never retry with a new key.
	ErrUnknownOutcome = errors.New("idem: outcome not confirmed yet")
	// ErrFailed: the operation settled as failed (the server refused it or
	// reported it failed), and nothing says it may have executed: a retry
	// under a new key is a new operation, not a second copy of this one.
	// The Result says why. An operation settled failed but flagged for
	// review (its request may have executed after all) is reported with
	// ErrNeedsReview and ErrUnknownOutcome instead, never ErrFailed.
	ErrFailed = errors.New("idem: operation failed")
	// ErrKeyConflict: the key is already used for a different request, in
	// the journal (from Prepare) or on the server (a 422 or 400 saying so),
	// or by a request the server's answer does not tell from ours (a key
	// "already used" to a first attempt, a replay of another request's
	// answer: flagged ReviewKeyInUse, open, with ErrNeedsReview).
	// Nothing is resent.
	ErrKeyConflict = errors.New("idem: idempotency key already used with a different request")
)

// Errors about the client itself.
var (
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("idem: client closed")
	// ErrNotFound: no operation with that scope and key in the journal.
	ErrNotFound = errors.New("idem: operation not found")
)

// Why a call ended with ErrUnknownOutcome. They are causes inside *Error,
// matched with errors.Is.
var (
	// ErrBudgetSpent: the call used its attempts or its elapsed time.
	ErrBudgetSpent = errors.New("idem: foreground budget spent")
	// ErrRetryBudgetEmpty: the retry budget (token bucket) of the
	// operation's host is empty, so retries are left to the reconciler.
	ErrRetryBudgetEmpty = errors.New("idem: the host's retry budget is empty")
	// ErrKeyExpired: the server's key window has passed since the first
	// send, so resending could execute the operation twice; only result
	// queries are allowed and a person must settle what they cannot.
	ErrKeyExpired = errors.New("idem: idempotency key window passed")
	// ErrNeedsReview: what the server or the clock said leaves the outcome
	// open and resending cannot settle it (a replayed 5xx, a clock that
	// stepped back); the operation is flagged for review (Result.Review
	// says why) and still queried where a result endpoint exists. Every
	// call for an open operation flagged for review matches it, beside
	// the cause that flagged it (ErrKeyExpired, ErrKeyConflict). It also
	// ends a call for an operation the journal holds as failed while the
	// server's word says it may have executed: an event or the server's
	// answer contradicts the failure (ReviewConfirmConflict; when it is
	// this call's answer, arriving after a confirmation or a manual
	// resolution settled the operation failed, the Result carries its
	// status and body), an earlier copy may have run on an endpoint that
	// ignores the key (ReviewMaybeTwice), or a server that lost the key
	// made the operation twice and one of them failed (ReviewMadeTwice).
	// The journal keeps the failed state until a person settles it with
	// Resolve. So does a succeeded operation a failure contradicts
	// (ReviewConfirmConflict: the server's answer or an event said
	// failed). One flagged because it may have executed twice
	// (ReviewMadeTwice, ReviewMaybeTwice) ends a call with no error,
	// Result.Review set: it did execute. One an event settled succeeded
	// while another request held its key (ReviewKeyInUse) ends in
	// ErrNeedsReview and ErrUnknownOutcome: the success may be the other
	// request's.
	ErrNeedsReview = errors.New("idem: flagged for review")
)

// errKeyInUse ends a call for an operation flagged ReviewKeyInUse: a
// key conflict, and flagged for a person like every other review, so
// that a caller testing for ErrNeedsReview finds it too.
var errKeyInUse = errorf("idem: %w: %w", ErrKeyConflict, ErrNeedsReview)

// errKeyNotCarried ends a call for an operation flagged
// ReviewKeyNotCarried.
var errKeyNotCarried = errorf("idem: %w: the journaled body does not carry the key, and this Client sends the key in the body (WithKeyInBody): "+
	"a send would carry no key, and every copy could execute; send it with the key header it was journaled with (WithKeyHeader), or settle it by hand (Resolve)", ErrNeedsReview)

// Error is returned by Do, Submit and Resolve for an operation that exists in
// the journal. It matches its Kind (ErrUnknownOutcome, ErrFailed or
// ErrKeyConflict) and its Cause with errors.Is. A key conflict also matches
// what the operation's state means: ErrFailed when it settled failed (the
// server refused the key's reuse), ErrUnknownOutcome while it is open (the
// server replayed another request's answer, or said only that the key
// was used: flagged for review, ErrNeedsReview too). A
// conflict with the journal (a key it holds for another request) matches
// ErrKeyConflict alone: nothing of that call's was journaled or sent. An
// operation settled failed but flagged for review matches
// ErrUnknownOutcome and ErrNeedsReview, not ErrFailed, whatever its State
// says (ErrNeedsReview). Every error for an operation flagged for review
// matches ErrNeedsReview, whatever else ended the call (ErrKeyExpired, a
// deadline passed, ErrKeyConflict). So every error that does not match
// ErrUnknownOutcome means nothing of the call's is journaled open or
// flagged for review, and nothing more will be sent for it.
type Error struct {
	Scope    string
	Key      string
	State    State
	Attempts int   // HTTP exchanges recorded for the operation, over its life
	Kind     error // ErrUnknownOutcome, ErrFailed or ErrKeyConflict
	Cause    error // what ended the call; may be nil
	// local: a conflict with the journal (Prepare or Submit with a key the
	// journal holds for another request): nothing of this call's was
	// journaled or sent, whatever the stored operation's state.
	local bool
	// review: the operation is flagged for review, whatever ended the
	// call (a key window passed, the deadline, another request's key):
	// it matches ErrNeedsReview, so a caller that sends those to a person
	// never leaves one to a reconciler that will not settle it.
	review bool
}

// Error describes the operation and why the call ended, for logs. A Cause
// that says the Kind again (a server's key conflict is both) is not
// repeated, nor is its "idem: ".
func (e *Error) Error() string {
	msg := fmt.Sprintf("%v (scope %q, key %q, state %s, %d attempts)", e.Kind, e.Scope, e.Key, e.State, e.Attempts)
	if e.Cause == nil {
		return msg
	}
	cause := e.Cause.Error()
	if e.Kind != nil {
		cause = strings.TrimPrefix(strings.TrimPrefix(cause, e.Kind.Error()), ": ")
	}
	if cause = strings.TrimPrefix(cause, "idem: "); cause != "" {
		msg += ": " + cause
	}
	return msg
}

// Unwrap returns Kind and Cause, so errors.Is finds either, for a key
// conflict the kind its state implies, and ErrNeedsReview for an
// operation flagged for review.
func (e *Error) Unwrap() []error {
	errs := []error{e.Kind}
	if e.Kind == ErrKeyConflict && !e.local {
		switch {
		case e.State == StateFailed:
			errs = append(errs, ErrFailed)
		case e.State != "" && !e.State.Terminal():
			errs = append(errs, ErrUnknownOutcome)
		}
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.review {
		errs = append(errs, ErrNeedsReview)
	}
	return errs
}

// errorf is fmt.Errorf for messages that start "idem: " and wrap an error
// whose text starts so too (an *Error, a journal write's error): the
// wrapped text is shown without it, so that a message names the package
// once. The chain is fmt.Errorf's.
func errorf(format string, args ...any) error {
	return errtext.Errorf("idem: ", format, args...)
}
