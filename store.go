package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idem/journal"
)

// Store is the durable journal a Client writes every operation to. The
// package journal implements it with bbolt; another backend must pass the
// conformance suite in journal/journaltest.
//
// Every write (Create, Update, Resolve) is durable when it returns without
// error, and not made at all when it returns an error, except one matching
// journal.ErrMaybeCommitted (the commit failed at a point after which it
// may have taken effect). Implementations must be safe for concurrent use.
//
// # Leases and fencing
//
// A Store may be shared by several processes (the PostgreSQL journal of
// module pgjournal), each with its own Client. Whoever drives an operation
// holds its lease (journal.Lease): an owner (WithLease names this
// Client's), an expiry, and a fencing token that grows on every claim of
// the record. The Client drives an operation only under a lease it took
// with Claim (Do, Submit, Resume), ClaimDue (Run) or, for Submit on a
// Store that implements CreateClaimer, with the record; it makes every write
// of that drive with a context carrying the lease (journal.WithLease), and
// the Store refuses such a write, with an error matching
// journal.ErrLeaseLost and without calling Update's function, once another
// owner has claimed the record: a replica presumed dead never overwrites a
// newer state. The Client then stops at once (nothing more sent or
// written; the caller told ErrUnknownOutcome) and never retries that
// write, unless the new owner settled the record (an operator's forced
// resolution): the caller is told that outcome, and a server's answer the
// refused write carried is recorded beside it as a Confirm does, which
// takes no lease and never overwrites an outcome (see ResponseSource).
// A drive that outlives its lease's margin extends it with Renew
// before each exchange and each wait; one that ends with the operation
// still open gives the lease up with Release, so that the reconciler of
// any replica may take the operation when it is due. A lease that its
// owner left behind (the process died) expires, and any owner may then
// claim the record: its token is greater, which fences the old owner.
//
// A Store used by one process at a time (the bbolt journal) keeps its
// leases in memory: one process's Client already joins callers of one key
// to one flight, so the leases only ever fence that process's own stale
// drives, and a restart starts with none. The Client gives each lease's
// end in its own clock (expires, with now). A Store shared by processes
// should judge leases by a clock of its own, taking only the lease's
// length from the caller's times, as the PostgreSQL journal does with the
// database's: a process whose clock runs fast would otherwise take live
// leases over. NextDue is in the callers' clocks, and so is the key
// window: processes sharing a Store still need clocks that agree.
//
// The Client makes its writes with contexts its caller's cancellation does
// not end (a write cut short is half-known), so a Store that reaches its
// journal over a network must bound each call itself, and report a call it
// gave up on after sending a write as journal.ErrMaybeCommitted, wrapping
// context.DeadlineExceeded: pgjournal does (WithCallTimeout). The Client
// then leaves that drive's lease to expire rather than wait on the same
// silent database again to release it.
type Store interface {
	// Create stores a new record. When (Scope, Key) exists it returns the
	// stored record and an error matching journal.ErrExists.
	Create(ctx context.Context, rec *journal.Record) (*journal.Record, error)
	// Get returns the record or an error matching journal.ErrNotFound.
	Get(ctx context.Context, scope, key string) (*journal.Record, error)
	// Update applies fn to a copy of the stored record (the bbolt journal
	// shares its Body, never written, for the Client's own Updates) and
	// commits the copy (fenced when ctx carries a lease: see
	// journal.WithLease);
	// nothing is written when fn returns an error. It returns an error
	// matching journal.ErrTerminal, without calling fn, when the record is
	// already succeeded or failed. fn may run more than once (when the
	// journal retries a round) and on another goroutine: it must only change
	// the record. The request (scope, key, method, URLs, headers, body),
	// Created and a manual resolution are not fn's to change
	// (journal.ErrInvalid).
	Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error)
	// Resolve settles a record by hand and records who did it and why
	// (fenced, as Update is, when ctx carries a lease), after
	// journal.CheckResolve allows it in the same transaction: one made
	// OnlyOpen writes nothing over a settled record (journal.ErrTerminal),
	// one made UnlessFlaggedKeyIgnored nothing over an open record flagged
	// ReviewKeyIgnored (journal.ErrFlaggedKeyIgnored).
	Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error)
	// Confirm applies journal.ApplyConfirmation to the stored record and
	// commits what it changed, in one transaction: it settles an open
	// record, or records that c agrees with a settled one, or flags the
	// record for review when c contradicts it (returning the stored record
	// with an error matching journal.ErrConfirmConflict). A (Source,
	// EventID) already recorded writes nothing and returns the stored
	// record with an error matching journal.ErrExists. A missing record is
	// journal.ErrNotFound, and nothing is created. One made
	// UnlessFlaggedKeyIgnored writes nothing over an open record flagged
	// ReviewKeyIgnored (journal.ErrFlaggedKeyIgnored, which
	// ApplyConfirmation returns).
	Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error)
	// ForEachOpen calls fn for every open (non-terminal) record, soonest due
	// first, outside any transaction. Its cost grows with the number of open
	// records, not with the journal's size.
	ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error
	// Due returns up to limit open records whose NextDue is not after by.
	// It reads; it claims nothing (see ClaimDue).
	//
	// ForEachOpen, Due and ClaimDue skip a record written by a newer idem
	// (one a rollback left, which Get fails on with journal.ErrVersion),
	// giving it no place in their limit, and tell an operator of it
	// (journaltest.NewerOpenRecord): failing on it would stop Resume and
	// Run from settling every other record.
	Due(ctx context.Context, by time.Time, limit int) ([]*journal.Record, error)

	// Claim takes the lease on an open record for owner until expires,
	// with a token greater than any the record had, and returns the
	// record and the lease. When another owner holds a lease on it that
	// is live at now, it takes nothing and returns the record, that
	// owner's lease and an error matching journal.ErrLeased. A terminal
	// record is returned with an error matching journal.ErrTerminal and
	// no lease; a missing one is journal.ErrNotFound. A claim by the
	// lease's own owner takes it anew (a new token): owners are unique
	// per live process.
	Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error)
	// ClaimDue claims, as Claim does, up to limit open records whose
	// NextDue is not after now and on which no owner, not even owner,
	// holds a lease live at now (owner's own is a drive of this Client's
	// under way, which Run must not fence), soonest due first, and
	// returns them with their leases.
	// Records other claimants are claiming at the same moment are skipped,
	// not waited for.
	ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error)
	// Renew extends lease l to expires, keeping its token; the error
	// matches journal.ErrLeaseLost if another owner claimed the record
	// since.
	Renew(ctx context.Context, l journal.Lease, expires time.Time) (journal.Lease, error)
	// Release gives lease l up, so that any owner may claim the record at
	// once; the error matches journal.ErrLeaseLost if l is no longer the
	// record's. A record's next claim still gets a greater token.
	Release(ctx context.Context, l journal.Lease) error

	// List returns the records that match f. It leaves out a record
	// written by a newer idem, without a place in f.Limit (and a Filter.After
	// page made only of such records does not end the listing), and fails
	// on a damaged one (journaltest.NewerListed): during a rollback the
	// operator still lists this build's operations, and Stats counts the
	// others (Newer, NewerOpen).
	List(ctx context.Context, f journal.Filter) ([]*journal.Record, error)
	// Prune deletes terminal records settled before the cut-off and returns
	// how many it deleted. It never deletes an open record, nor one
	// flagged for review (a contradicting confirmation). A record's
	// settlement is judged by the latest time it journals up to it
	// (Record.Prunable, Record.RetainFrom), not by Settled alone, which a
	// clock stepped back before it settled makes too old.
	Prune(ctx context.Context, settledBefore time.Time) (int, error)
	// Close releases the journal.
	Close() error
}

// KeyIgnoringStore is a Store that keeps the endpoints a Client learnt
// ignore the idempotency key (an answer's Idempotency-Status: ignored),
// so that the next process knows them after every operation flagged for
// one (ReviewKeyIgnored) has settled: a payment there whose answer is
// lost is then flagged for review, not resent under the same key, which
// such an endpoint executes again. An endpoint is its method, a space and
// its URL without userinfo, query or fragment: no credentials.
// The bbolt journal and pgjournal implement it; on a Store without it a
// Client relearns an endpoint only from the open operations flagged for
// it, and from its answers.
type KeyIgnoringStore interface {
	// AddKeyIgnoring records endpoint, durably when it returns nil. One
	// already recorded writes nothing. The Client calls it in a goroutine
	// of its own, with a context that ends after 10 s; the call whose
	// answer taught the endpoint waits for it before journaling that
	// answer (unless the answer's outcome is flagged ReviewKeyIgnored),
	// and calls it once more if it failed, as Close does for any whose
	// save failed. A Confirm or a result
	// query that may settle an operation flagged ReviewKeyIgnored calls
	// it first, within its own context and 10 s, and waits: the flag may
	// be all that tells the next process. A Store may keep a
	// bounded number (journal.MaxKeyIgnoringEndpoints); one more past it
	// writes nothing and returns an error matching
	// journal.ErrKeyIgnoringFull, never nil: the Client takes it for a
	// failed save, so a Confirm or a result query leaves the operation
	// flagged, and logs it once.
	AddKeyIgnoring(ctx context.Context, endpoint string) error
	// KeyIgnoringEndpoints returns every endpoint recorded.
	KeyIgnoringEndpoints(ctx context.Context) ([]string, error)
}

// ErrKeyIgnoringUnkept is matched by the error of a KeyIgnoringStore that
// has no place for the endpoints yet (pgjournal whose schema Migrate has
// not brought to version 2, its other tables working): the Client reads
// it as no endpoint kept, relearns them from the open operations flagged
// for them as a Store without KeyIgnoringStore does, and logs it once,
// rather than hold every resend until the schema is migrated.
var ErrKeyIgnoringUnkept = errors.New("idem: the journal keeps no endpoints that ignore the key yet")

// KeyIgnoringRemover is a KeyIgnoringStore that can forget an endpoint
// (Client.ForgetKeyIgnoring): RemoveKeyIgnoring removes endpoint, as
// AddKeyIgnoring recorded it, and reports whether it was recorded. The
// bbolt journal and pgjournal implement it.
type KeyIgnoringRemover interface {
	KeyIgnoringStore
	RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, error)
}

var _ KeyIgnoringRemover = (*journal.Store)(nil)
