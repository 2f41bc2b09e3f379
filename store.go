package idem

import (
	"context"
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
type Store interface {
	// Create stores a new record. When (Scope, Key) exists it returns the
	// stored record and an error matching journal.ErrExists.
	Create(ctx context.Context, rec *journal.Record) (*journal.Record, error)
	// Get returns the record or an error matching journal.ErrNotFound.
	Get(ctx context.Context, scope, key string) (*journal.Record, error)
	// Update applies fn to a copy of the stored record and commits the copy;
	// nothing is written when fn returns an error. It returns an error
	// matching journal.ErrTerminal, without calling fn, when the record is
	// already succeeded or failed. fn may run more than once (when the
	// journal retries a round) and on another goroutine: it must only change
	// the record. The request (scope, key, method, URLs, headers, body),
	// Created and a manual resolution are not fn's to change
	// (journal.ErrInvalid).
	Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error)
	// Resolve settles a record by hand and records who did it and why.
	Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error)
	// Confirm applies journal.ApplyConfirmation to the stored record and
	// commits what it changed, in one transaction: it settles an open
	// record, or records that c agrees with a settled one, or flags the
	// record for review when c contradicts it (returning the stored record
	// with an error matching journal.ErrConfirmConflict). A (Source,
	// EventID) already recorded writes nothing and returns the stored
	// record with an error matching journal.ErrExists. A missing record is
	// journal.ErrNotFound, and nothing is created.
	Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error)
	// ForEachOpen calls fn for every open (non-terminal) record, soonest due
	// first, outside any transaction. Its cost grows with the number of open
	// records, not with the journal's size.
	ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error
	// Due returns up to limit open records whose NextDue is not after by.
	Due(ctx context.Context, by time.Time, limit int) ([]*journal.Record, error)
	// List returns the records that match f.
	List(ctx context.Context, f journal.Filter) ([]*journal.Record, error)
	// Prune deletes terminal records settled before the cut-off and returns
	// how many it deleted. It never deletes an open record.
	Prune(ctx context.Context, settledBefore time.Time) (int, error)
	// Close releases the journal.
	Close() error
}
