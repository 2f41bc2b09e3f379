package idem

import (
	"context"
	"errors"
	"log/slog"
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
	// When the write may or may not have committed (an error matching
	// journal.ErrMaybeCommitted) it returns a nil record and, if it
	// knows it, the lease the write took if it committed: Submit, which
	// drives nothing then, gives that lease up (Release is fenced by its
	// token), so that another replica need not wait for it to expire. A
	// Store that cannot tell the token returns a zero Lease.
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

// releaseMaybeCreated gives up l, the lease Submit's create took with its
// record if that create committed after all (err, journal.ErrMaybeCommitted):
// Submit drives nothing then, and another replica's Submit of the same
// key would otherwise wait for the lease to expire. Its token fences the
// release to that lease alone: a create that did not commit, or a record
// claimed since, is left as it is. Made with ctx's values but not its end,
// whose cut may be what left the create half-known; skipped when the Store
// gave up waiting for its database (storeStalled), which would hold the
// caller as long again. A failure leaves the lease to expire.
func (c *Client) releaseMaybeCreated(ctx context.Context, rec *journal.Record, l journal.Lease, err error) {
	if l.Token == 0 || storeStalled(err) && ctx.Err() == nil {
		return
	}
	rerr := c.store.Release(context.WithoutCancel(ctx), l)
	if rerr != nil && !errors.Is(rerr, journal.ErrLeaseLost) && !errors.Is(rerr, journal.ErrNotFound) {
		c.log.LogAttrs(ctx, slog.LevelWarn, "idem: lease of a create that may not have committed not released; it expires by itself",
			append(opAttrs(rec), slog.Any("err", rerr))...)
	}
}
