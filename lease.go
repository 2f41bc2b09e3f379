package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/journal"
)

// DefaultLeaseDuration is how long a lease outlasts the exchange it covers
// (see WithLease): long enough that a busy process renews in time, short
// enough that another replica takes over a dead one's work soon.
const DefaultLeaseDuration = 30 * time.Second

// leasePoll spaces a waiting caller's claims of an operation another owner
// drives.
const leasePoll = 200 * time.Millisecond

// WithLease names this Client's owner in the leases it takes (see Store)
// and sets how long a lease outlasts the exchange or wait it covers. The
// owner must be unique among the live processes sharing a journal: a pod
// name, or the default, the host name, process id and a random suffix.
// Default DefaultLeaseDuration; only a Store shared by several processes
// (PostgreSQL) needs either.
func WithLease(owner string, d time.Duration) Option {
	return optionFunc(func(c *config) {
		if err := checkName("lease owner", owner); err != nil {
			c.errs = append(c.errs, err)
			return
		}
		if positive(c, "WithLease duration", d) {
			c.owner, c.leaseFor = owner, d
		}
	})
}

// defaultOwner names a Client in its leases: unique per Client, and
// readable by an operator who lists who drives what.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
}

// leaseSpan is how far from now a lease must reach to cover need (an
// exchange, a wait) with the lease's margin.
// It saturates: an attempt timeout or lease of math.MaxInt64 ("no limit")
// would otherwise wrap to a lease that ends before it is taken, which any
// other claimant, Run included, could take under the drive.
func (c *Client) leaseSpan(need time.Duration) time.Duration { return addSat(need, c.cfg.leaseFor) }

// addSat is a + b for non-negative durations, at most math.MaxInt64.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// leaseLostError ends a drive whose lease another owner took over: the
// operation is that owner's now.
type leaseLostError struct{ err error }

func (e *leaseLostError) Error() string {
	return "idem: another replica took the operation over; it drives it now: " + e.err.Error()
}
func (e *leaseLostError) Unwrap() error { return e.err }

// claim takes the operation's lease for a drive in mode. A terminal record
// comes back without a lease (there is nothing to drive). When another
// owner drives the operation, a caller (mode foreground) polls, within its
// budget, until that owner settles it, gives the lease up or lets it
// expire; Resume does not wait. Either then gets the record with an error
// matching journal.ErrLeased: the operation is journaled, and someone
// else's now.
//
// The Store's Claim runs under ctx: one stalled behind the journal (a
// stuck fsync, a row lock another transaction holds) ends with the
// caller's deadline, not the stall, and a call cut so learns the state
// from claimCut. A ctx already done when the claim starts does not end
// it: the caller still learns the state, and the drive what it does at
// once with a done ctx, as before.
func (c *Client) claim(ctx context.Context, scope, key string, mode driveMode) (*journal.Record, journal.Lease, error) {
	wctx := ctx
	if ctx.Err() != nil {
		wctx = context.WithoutCancel(ctx)
	}
	now := c.cfg.clock.Now()
	deadline := now.Add(c.cfg.maxElapsed)
	for {
		rec, l, err := c.store.Claim(wctx, scope, key, c.cfg.owner, now, now.Add(c.leaseSpan(c.cfg.attemptTimeout)))
		switch {
		case err == nil:
			return rec, l, nil
		case errors.Is(err, journal.ErrTerminal) && rec != nil:
			return rec, journal.Lease{}, nil
		case !errors.Is(err, journal.ErrLeased) || rec == nil:
			return nil, journal.Lease{}, err
		}
		wait := min(l.Expires.Sub(now), leasePoll)
		if mode != foreground || ctx.Err() != nil || !now.Add(wait).Before(deadline) {
			return rec, l, fmt.Errorf("idem: %s drives the operation (lease until %s): %w",
				l.Owner, l.Expires.UTC().Format(time.RFC3339), err)
		}
		if err := c.cfg.clock.Sleep(ctx, max(wait, time.Millisecond)); err != nil {
			return rec, l, fmt.Errorf("idem: %s drives the operation: %w", l.Owner, errors.Join(journal.ErrLeased, context.Cause(ctx)))
		}
		now = c.cfg.clock.Now()
	}
}

// claimAndDrive claims the operation and drives it. created is the record
// this call has just journaled (Submit), nil otherwise: a claim that fails
// then still leaves an operation journaled, and the caller is told its
// outcome is unknown (promise 13).
func (c *Client) claimAndDrive(ctx context.Context, scope, key string, created *journal.Record, mode driveMode) (*Result, error) {
	rec, l, err := c.claim(ctx, scope, key, mode)
	switch {
	case errors.Is(err, journal.ErrLeased):
		return c.finish(rec, err)
	case err != nil && created != nil:
		return c.finish(created, &journalError{withCause(ctx, err)})
	case err != nil && ctx.Err() != nil:
		return c.claimCut(ctx, scope, key, err)
	case err != nil:
		return nil, c.lookupErr(scope, key, err)
	}
	return c.drive(ctx, rec, l, mode, created != nil && unsentSince(rec, created))
}

// cutReadBound bounds the read of a call whose claim its ctx cut: a
// journal whose claim stalls but that answers reads (bbolt behind a
// stuck fsync, PostgreSQL behind a row lock) answers well within it; one
// that has stopped answering must not hold the caller, already past its
// deadline, for a journal call's whole bound more.
const cutReadBound = time.Second

// claimCut is what a call whose ctx ended during its claim is told: the
// operation as journaled (unknown while open, never failed: nothing was
// sent, and a claim cut after its commit leaves our lease to expire,
// attemptTimeout plus the lease's margin, or to this owner's next claim),
// with ctx's cause; unread, the cause and the read's error. The read is
// not ended by ctx, which has: a Get does not wait for the commit a
// stalled Claim waits for.
func (c *Client) claimCut(ctx context.Context, scope, key string, err error) (*Result, error) {
	cause := withCause(ctx, err)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cutReadBound)
	defer cancel()
	rec, gerr := c.store.Get(rctx, scope, key)
	if gerr != nil {
		return nil, errors.Join(cause, c.lookupErr(scope, key, gerr))
	}
	return c.finish(rec, cause)
}

// unsentSince reports whether rec, as claimed, still ends with the attempt
// Submit journaled with created, unsent. Another replica may have claimed
// the operation first and driven it (closing that attempt as "may have
// been sent"): then the next send must journal an attempt of its own.
func unsentSince(rec, created *journal.Record) bool {
	n := len(rec.Attempts)
	return n > 0 && attemptCount(rec) == attemptCount(created) && !rec.Attempts[n-1].Done
}

// hold makes the drive's lease cover need from now, renewing it when less
// than half its margin is left. The renewals are bounded by the drive's
// exchanges and waits. What is left is judged by the Client's clock: a
// clock stepped back may skip a renewal the Store's clock needed, and the
// lease may end under the drive; fencing then stops it at its next write,
// before any new submit (see pgjournal's Store on what that leaves).
func (d *driver) hold(now time.Time, need time.Duration) error {
	if d.lease.Token == 0 {
		return nil
	}
	if d.lease.Expires.After(now.Add(addSat(need, d.c.cfg.leaseFor/2))) {
		return nil
	}
	l, err := adopting(d, func() (journal.Lease, error) {
		return d.c.store.Renew(d.wctx, d.lease, now.Add(d.c.leaseSpan(need)))
	})
	if err != nil {
		if errors.Is(err, journal.ErrLeaseLost) {
			return d.lost(err)
		}
		d.journalStalled = storeStalled(err)
		d.c.log.LogAttrs(d.ctx, slog.LevelError, "idem: lease renewal failed", append(opAttrs(d.rec), slog.Any("err", err))...)
		return &journalError{err}
	}
	d.lease = l
	return nil
}

// unheld ends a drive whose hold of its lease before a send, err,
// failed. Another owner's claim fenced it: the caller is told that
// owner's outcome if settled (settledElsewhere). A renewal the journal
// failed says nothing of the lease, but this drive knows an attempt
// journaled for the send (unsentAttempt) never went: closed as such
// (handoff), under the token, which another owner's claim still fences.
// Left open, it read "may have been sent": unknown, and a resend
// withheld for a person at an endpoint known to read no key. A journal
// that stopped answering is not waited on again.
func (d *driver) unheld(err error) error {
	switch {
	case d.leaseLost:
		return d.settledElsewhere(err)
	case d.journalStalled || d.unsentAttempt() == 0:
		return err
	}
	return d.handoff(err, time.Time{})
}

// lost ends the drive on a write or renewal refused because another owner
// claimed the operation: nothing more is sent or written.
func (d *driver) lost(err error) error {
	d.leaseLost = true
	d.c.log.LogAttrs(d.ctx, slog.LevelInfo, "idem: lease lost: another replica drives the operation",
		append(opAttrs(d.rec), slog.Any("err", err))...)
	return &leaseLostError{err}
}

// storeStalled reports whether a journal call failed because the Store gave
// up waiting for its database (pgjournal's WithCallTimeout): the drive's
// journal contexts never end of themselves, so a deadline is the Store's.
func storeStalled(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// releasesContext is the context of a batch of best-effort lease releases
// (Run's, of the operations a pass claimed but did not visit): not ended
// by ctx, so that a Run shutting down still gives its leases up, but
// bounded as a whole by the attempt timeout, so that a database that has
// stopped answering holds Run for that long, not for one journal bound
// per lease (a batch is up to 256). A release not made leaves its lease to
// expire.
func (c *Client) releasesContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.attemptTimeout)
}

// release gives the lease up at the end of a drive that left the operation
// open, so that any replica's reconciler may take it when it is due. A
// failure only delays that until the lease expires, and so does a drive
// whose journal call found the database not answering: its release would
// most likely wait as long again, and hold the caller past its deadline
// twice over. A drive that settled the operation has nothing to give up
// (its terminal write dropped the lease); one that found it settled
// elsewhere (Resolve, Confirm) made no such write, and gives it up too,
// or the bbolt journal, which keeps leases in memory, would keep the
// entry until the process ends.
func (d *driver) release(settledElsewhere bool) {
	if l, ok := d.c.handover.take(opID{d.rec.Scope, d.rec.Key}, false); ok && !d.leaseLost && l.Token > d.lease.Token && d.lease.Token != 0 {
		d.lease = l // Run's claim, handed to this drive, which wrote no more since
	}
	if d.lease.Token == 0 || d.leaseLost || !d.rec.Open() && !settledElsewhere {
		return
	}
	if d.journalStalled {
		d.c.log.LogAttrs(d.ctx, slog.LevelWarn, "idem: lease not released: the journal did not answer; it expires by itself",
			opAttrs(d.rec)...)
		return
	}
	if err := d.c.store.Release(d.wctx, d.lease); err != nil && !errors.Is(err, journal.ErrLeaseLost) {
		d.c.log.LogAttrs(d.ctx, slog.LevelWarn, "idem: lease release failed; it expires by itself",
			append(opAttrs(d.rec), slog.Any("err", err))...)
	}
}

// handovers are the claims Run's ClaimDue took on operations a call of
// this Client was driving at that moment: only possible once that call's
// lease looked expired (a clock stepped ahead, a journal slow to commit).
// The claim fences the call, yet the operation is this process's own, and
// Run's visit would only join the call: so Run hands the claim to the
// call instead of visiting (handOver), and the call, refused a write or a
// renewal, takes it up and goes on (adopt) rather than drop the answer it
// holds as "another replica's".
type handovers struct {
	// claiming is held across Run's ClaimDue and its hand-over: a call
	// refused a write waits for it before it looks for a claim.
	claiming sync.Mutex
	mu       sync.Mutex
	n        atomic.Int32 // len(leases): most drives end with none to look up
	leases   map[opID]journal.Lease
}

// handOver removes from due, just claimed by Run (h.claiming held), the
// operations a call of c drives right now, and hands their claims to
// those calls.
func (c *Client) handOver(due []journal.Claimed) []journal.Claimed {
	h := &c.handover
	c.mu.Lock()
	defer c.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := due[:0]
	for _, d := range due {
		id := opID{d.Record.Scope, d.Record.Key}
		if _, driving := c.inflight[id]; !driving {
			delete(h.leases, id) // a call's that ended before it needed it
			kept = append(kept, d)
			continue
		}
		if h.leases == nil {
			h.leases = map[opID]journal.Lease{}
		}
		h.leases[id] = d.Lease
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "idem: reconciler: claimed an operation a call of this process drives (its lease looked expired: was the clock stepped?); the call keeps it",
			slog.String("scope", d.Record.Scope), slog.String("key", d.Record.Key))
	}
	h.n.Store(int32(len(h.leases)))
	return kept
}

// take removes and returns the claim Run handed over for id, if any;
// after Run's hand-over under way, if wait.
func (h *handovers) take(id opID, wait bool) (journal.Lease, bool) {
	if wait {
		h.claiming.Lock()
		//lint:ignore SA2001 a barrier: Run's hand-over under way is done
		h.claiming.Unlock()
	}
	if h.n.Load() == 0 {
		return journal.Lease{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.leases[id]
	if ok {
		delete(h.leases, id)
		h.n.Store(int32(len(h.leases)))
	}
	return l, ok
}

// maxAdoptions bounds the claims a drive takes up for one write: the claim
// it took up may itself have expired by then (the drive was held longer
// than a lease, as by a clock stepped ahead), and Run's next pass claims
// and hands it over again between the take and the write.
const maxAdoptions = 4

// adopting runs a journal write under the drive's lease, and again under
// each claim Run handed this drive (adopt) when the Store refused the
// write as another owner's, up to maxAdoptions times.
func adopting[T any](d *driver, write func() (T, error)) (T, error) {
	v, err := write()
	for range maxAdoptions {
		if !errors.Is(err, journal.ErrLeaseLost) || !d.adopt() {
			break
		}
		v, err = write()
	}
	return v, err
}

// adopt takes up the claim Run handed to this drive, after a write or
// renewal of its own lease was refused, and reports whether it did: the
// refusal was then Run's claim, not another owner's.
func (d *driver) adopt() bool {
	if d.lease.Token == 0 {
		return false
	}
	l, ok := d.c.handover.take(opID{d.rec.Scope, d.rec.Key}, true)
	if !ok || l.Token <= d.lease.Token {
		return false
	}
	d.lease = l
	return true
}

// takeOverer is a Store that can take a live lease of another owner over
// (pgjournal's TakeOver), for a resolution forced over a drive.
type takeOverer interface {
	TakeOver(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error)
}

// errResolving is the cause a caller joined to a Resolve is told when the
// operation is still open after it: that caller then drives it itself.
var errResolving = errors.New("idem: the operation was being resolved by hand")

// holdForResolve makes sure no drive of the operation is under way while
// Resolve writes: a request on the wire may still execute after a
// resolution "failed" the caller acts on (a second payment under a new
// key). It stands in the Client's in-flight set as a call, so that a
// drive of this process starting meanwhile waits for it, and claims the
// operation's lease, so that another owner's drive does not start either
// (and one of this process that the set missed, Run's claim made before
// its visit, is fenced before it sends). It returns the context to write
// under and what to run after the write. Without force, a drive under
// way is refused with an error matching journal.ErrLeased. With force, a
// drive of this process keeps its lease, so that its late answer is
// journaled beside the resolution (a claim would fence it and drop the
// answer); another owner's lease is taken over where the Store can, and
// written beside where it cannot (the bbolt journal, in-process only).
func (c *Client) holdForResolve(ctx context.Context, scope, key string, force bool) (context.Context, func(), error) {
	id := opID{scope, key}
	cl := &call{mode: foreground, resolving: true}
	c.mu.Lock()
	cur, driving := c.inflight[id]
	if !driving {
		c.inflight[id] = cl
	}
	c.mu.Unlock()
	switch {
	case driving && force:
		// Written beside the drive, whose late answer is journaled
		// beside it, or beside the first resolution: the journal keeps
		// the two apart (OnlyOpen, resolvedAfterAll).
		return ctx, func() {}, nil
	case driving && cur.resolving:
		// An operator's double-submit: the first may still be claiming
		// the lease, which another owner's live one refuses; this one,
		// written now, would skip that check.
		return nil, nil, fmt.Errorf("idem: Resolve (scope %q, key %q): another resolution of the operation is under way in this process: nothing was written; resolve it again once that one ends: %w",
			scope, key, journal.ErrLeased)
	case driving:
		return nil, nil, fmt.Errorf("idem: Resolve (scope %q, key %q): a call of this process (%s) drives the operation, and its request may be on the wire: nothing was written; resolve it again once that call ends, or with Force (its answer is then journaled beside the resolution): %w",
			scope, key, c.cfg.owner, journal.ErrLeased)
	}
	ended := func() {
		// Joiners drive the operation themselves if it is still open.
		cl.res, cl.err = c.current(scope, key, errResolving)
		cl.stopped = true
		c.endCall(id, cl)
	}
	// Unless handed to the caller, the hold ends here, on every path
	// out, a Store's panic too: left, every Do and Submit of the key in
	// this process would join it for ever.
	handed := false
	defer func() {
		if !handed {
			ended()
		}
	}()
	claim := c.store.Claim
	if t, ok := c.store.(takeOverer); ok && force {
		claim = t.TakeOver
	}
	now := c.cfg.clock.Now()
	// Under the caller's context: a claim stalled behind the journal (a
	// stuck fsync, a row lock another transaction holds) ends with the
	// operator's deadline, the key's hold with it, and takes nothing
	// (both journals' Claim give up a wait cut by ctx unclaimed).
	rec, l, err := claim(ctx, scope, key, c.cfg.owner, now, now.Add(c.cfg.leaseFor))
	switch {
	case err == nil:
		handed = true
		return journal.WithLease(ctx, l), func() {
			defer ended()
			// Resolve settled it (the lease went with it) or failed:
			// either way the lease has done its work. Given up past
			// the caller's context, or it would block drives until it
			// expires, but bounded, as Run's releases are: a journal
			// that stopped answering leaves it to expire instead.
			rctx, cancel := c.releasesContext(ctx)
			defer cancel()
			_ = c.store.Release(rctx, l)
		}, nil
	case errors.Is(err, journal.ErrLeased) && rec != nil && force:
		handed = true
		return ctx, ended, nil
	case errors.Is(err, journal.ErrLeased) && rec != nil:
		return nil, nil, fmt.Errorf("idem: Resolve (scope %q, key %q): %s drives the operation, its lease running until %s (%s from now), and its request may be on the wire: nothing was written; resolve it again once the lease ends, or with Force to take it over: %w",
			scope, key, l.Owner, l.Expires.UTC().Format(time.RFC3339), l.Expires.Sub(now).Round(time.Second), err)
	case errors.Is(err, journal.ErrTerminal), errors.Is(err, journal.ErrNotFound):
		// Settled (nothing drives it) or absent: Resolve says which.
		handed = true
		return ctx, ended, nil
	default:
		return nil, nil, errorf("idem: Resolve (scope %q, key %q): nothing was written: %w", scope, key, withCause(ctx, err))
	}
}
