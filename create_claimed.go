package idem

import (
	"context"
	"time"

	"github.com/idemkit/idem/journal"
)

// CreateClaimer is a Store that journals a new record and takes its lease
// in one write: Submit then commits once where Create followed by Claim
// commits twice, and need not read its record back. Submit uses it when
// the Store implements it (the PostgreSQL journal of module pgjournal and
// the bbolt journal do); a Store without it is claimed after Create. A
// Store may return the record without a lease (a zero Lease) when it
// cannot take one at once: Submit then claims it as Do would. A wrapper
// that embeds such a Store and changes what Create does must change
// CreateClaimed too, or Submit goes around it.
type CreateClaimer interface {
	// CreateClaimed is Create with the new record leased to owner until
	// expires, with a token as Claim would take on it, in the same
	// commit: it returns the stored record and its lease. When (Scope,
	// Key) exists it writes nothing and returns the stored record, a
	// zero Lease and an error matching journal.ErrExists, as Create does.
	CreateClaimed(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error)
}

// createClaimed journals Submit's record: with its lease, when the Store
// takes both in one write, or with Create alone (a zero Lease: the caller
// claims it then).
func (c *Client) createClaimed(ctx context.Context, rec *journal.Record) (*journal.Record, journal.Lease, error) {
	if cc, ok := c.store.(CreateClaimer); ok {
		now := c.cfg.clock.Now()
		return cc.CreateClaimed(ctx, rec, c.cfg.owner, now.Add(c.leaseSpan(c.cfg.attemptTimeout)))
	}
	stored, err := c.store.Create(ctx, rec)
	return stored, journal.Lease{}, err
}
