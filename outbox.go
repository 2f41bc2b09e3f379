package idem

import (
	"context"
	"fmt"

	"github.com/idemkit/idem/journal"
)

// PrepareIn is Prepare with the journal write made by create rather than
// by the Client's Store: a Store that can write inside the caller's own
// database transaction (pgjournal's PrepareTx) journals the intent
// together with the caller's business rows, so both commit or roll back
// together (the outbox pattern). create must store the record as the
// Client's Store's Create would (ErrExists with the stored record for a
// key that exists), in the same database as the Client's Store.
//
// req must carry its Key, one of the business row's (an order's id): a
// COMMIT whose answer is lost (the connection broke) may have committed,
// and the transaction run again must journal under the same key, where
// it finds the intent, not under a new one (a second charge). A request
// without a Key is refused with ErrInvalidRequest.
//
// The operation is due at once: once the transaction commits, the first
// Run of any process sharing the journal sends it (or a Do, whichever
// claims it first; leases keep it to one). If the transaction rolls back,
// nothing was journaled and nothing will be sent. Errors are Prepare's;
// an error matching ErrUnknownOutcome is create's journal.ErrMaybeCommitted,
// or a create that returned neither the record nor an error (it may have
// journaled it): retry with the same key.
func (c *Client) PrepareIn(ctx context.Context, req Request, create func(context.Context, *journal.Record) (*journal.Record, error)) (*Operation, error) {
	if create == nil {
		return nil, fmt.Errorf("%w: PrepareIn: nil create function", ErrInvalidRequest)
	}
	if req.Key == "" {
		// A key made here is one the transaction run again after a lost
		// COMMIT answer cannot find: it would journal a second charge.
		return nil, fmt.Errorf("%w: PrepareIn: no Key: set Request.Key from the business row (e.g. \"charge-\" + the order's id), so that the transaction, run again after its COMMIT's answer is lost, finds this intent rather than journaling a second charge", ErrInvalidRequest)
	}
	return c.prepare(ctx, req, create, true) // nobody is waiting to call Do for it
}
