package pgjournal

import (
	"context"

	"github.com/idemkit/idem/journal"
)

// Confirm records an outcome learned from outside the client's exchanges
// (a webhook event) and settles an open record with it, as the bbolt
// journal's Confirm does: journal.ApplyConfirmation decides, inside the
// same optimistic round as any other write, so a confirmation racing a
// driver's write is applied to what that write left. It takes no lease: a
// webhook reaches any replica, and the lease holder's next write then
// meets a terminal record (journal.ErrTerminal) and stops. A redelivered
// event writes nothing and returns the stored record with an error
// matching journal.ErrExists (and journal.ErrConfirmConflict if its
// first delivery conflicted).
func (s *Store) Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error) {
	if err := c.Validate(); err != nil {
		return nil, errorf("confirm %q: %w", key, err)
	}
	var effect journal.ConfirmEffect
	var verdict error
	stored, err := s.write(ctx, "confirm", scope, key, func(r *journal.Record) error {
		effect, verdict = journal.ApplyConfirmation(r, c)
		switch {
		case effect == journal.ConfirmInvalid:
			return verdict
		case !effect.Changed():
			return errUnchanged
		}
		return journal.CheckRecord(r)
	})
	switch {
	case err != nil:
		return nil, err
	case effect == journal.ConfirmDuplicate && verdict != nil:
		return stored, errorf("confirm %q: event %s/%s already recorded (%w): %w", key, c.Source, c.EventID, journal.ErrExists, verdict)
	case effect == journal.ConfirmDuplicate:
		return stored, errorf("confirm %q: event %s/%s already recorded: %w", key, c.Source, c.EventID, journal.ErrExists)
	case verdict != nil:
		return stored, errorf("confirm %q: %w", key, verdict)
	}
	return stored, nil
}
