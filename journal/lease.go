package journal

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Lease is a claim on one operation: while it holds, only its Owner sends
// the operation's requests or writes its record. In a journal shared by
// several processes (PostgreSQL) it is what keeps two replicas from
// driving one operation at once.
//
// Token is the fencing token: it grows on every claim of the record, by
// any owner, and every write made under the lease carries it. A write
// whose token is no longer the record's (another owner claimed the record
// after this lease expired) is refused with ErrLeaseLost, so an owner that
// was presumed dead cannot overwrite a newer state.
type Lease struct {
	Scope   string
	Key     string
	Owner   string    // who holds it: one name per live process
	Token   uint64    // fencing token; 0 means no lease
	Expires time.Time // after it, any owner may claim the record
}

// Held reports whether l is a live lease of another owner than owner at
// now: one a claim by owner must not take over.
func (l Lease) Held(owner string, now time.Time) bool {
	return l.Owner != "" && l.Owner != owner && now.Before(l.Expires)
}

// Claimed is a record and the lease its claimant now holds on it.
type Claimed struct {
	Record *Record
	Lease  Lease
}

// Errors of leases.
var (
	// ErrLeased means Claim found the record leased by another owner, and
	// the lease has not expired: that owner drives the operation. Claim
	// returns the holder's lease with it.
	ErrLeased = errors.New("journal: operation leased by another owner")
	// ErrLeaseLost means a write, Renew or Release carried a lease that is
	// no longer the record's: another owner claimed the record since. The
	// operation is that owner's now; the write was not made, and must not
	// be retried.
	ErrLeaseLost = errors.New("journal: lease lost: another owner claimed the operation")
)

// leases is the bbolt journal's lease table. One process holds the file,
// and a process's Client already joins callers of one key to one flight,
// so leases need not survive the process: they live in memory, and a
// restart (the only way another owner gets the file) starts with none.
type leases struct {
	mu    sync.Mutex
	next  uint64 // last token handed out, journal-wide
	table map[leaseID]Lease
	// checked holds the records whose writes passed their lease check
	// in the committer's round under way (checkInRound), and roundEnd is
	// closed when that round ends (roundEnded), its writes published or
	// failed. roundEnd is made only when a claim of a checked record
	// must wait for it (checkedIn), not by every round with a leased
	// write: nil until then. There is one round at a time.
	checked  map[leaseID]struct{}
	roundEnd chan struct{}
}

// leaseID keys the lease table. A struct rather than scope, NUL, key
// joined: the joined string, longer than the compiler's 32-byte stack
// buffer for a UUID key, was a heap allocation on every lookup, and
// every write under a lease looks its lease up twice.
type leaseID struct{ scope, key string }

func (t *leases) get(scope, key string) Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.table[leaseID{scope, key}]
}

// claim takes the lease for owner unless another owner's is live at now,
// or, unless again is set, owner's own.
func (t *leases) claim(scope, key, owner string, now, expires time.Time, again bool) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := leaseID{scope, key}
	cur := t.table[id]
	if cur.Held(owner, now) || !again && cur.Owner != "" && now.Before(cur.Expires) {
		return cur, ErrLeased
	}
	if t.table == nil {
		t.table = make(map[leaseID]Lease)
	}
	t.next++
	l := Lease{Scope: scope, Key: key, Owner: owner, Token: t.next, Expires: expires}
	t.table[id] = l
	return l, nil
}

// claimAfterRound is claim (again set) for Claim, which reads the record
// next. A write under the record's old lease that passed its check in
// the round under way (checkInRound) is published when that round ends,
// after the claim that came too late to fence it: ended, when not nil, is
// closed then, and the read must wait for it, or it misses the write.
func (t *leases) claimAfterRound(scope, key, owner string, now, expires time.Time) (l Lease, ended <-chan struct{}, err error) {
	l, err = t.claim(scope, key, owner, now, expires, true)
	if err != nil {
		return l, nil, err
	}
	return l, t.checkedIn(scope, key), nil
}

// checkedIn returns, when a write of the record passed its lease check in
// the round under way (checkInRound), the channel closed when that round
// ends; nil otherwise. Called after a claim of the record: a write that
// checks its lease later is fenced by the claim.
func (t *leases) checkedIn(scope, key string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.checked[leaseID{scope, key}]; !ok {
		return nil
	}
	// Made under mu while the record is in checked, which only
	// roundEnded empties, under mu, closing it: it is closed when the
	// round under way ends, as if the round had made it.
	if t.roundEnd == nil {
		t.roundEnd = make(chan struct{})
	}
	return t.roundEnd
}

// checkInRound is check, made inside a round of the committer by a write
// that the round publishes when it ends: the record is in checked until
// then (see claimAfterRound).
func (t *leases) checkInRound(l Lease) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := leaseID{l.Scope, l.Key}
	if l.Token == 0 || t.table[id].Token != l.Token {
		return ErrLeaseLost
	}
	if t.checked == nil {
		t.checked = make(map[leaseID]struct{})
	}
	t.checked[id] = struct{}{}
	return nil
}

// roundEnded says that the committer's round under way has ended: its
// writes are published, or failed.
func (t *leases) roundEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.roundEnd != nil {
		close(t.roundEnd)
		t.roundEnd = nil
	}
	if len(t.checked) > 0 {
		clear(t.checked)
	}
}

// grant gives owner a new lease until expires, whatever entry the table
// had: the record has just been created, so any entry is a stale one.
func (t *leases) grant(scope, key, owner string, expires time.Time) Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.table == nil {
		t.table = make(map[leaseID]Lease)
	}
	t.next++
	l := Lease{Scope: scope, Key: key, Owner: owner, Token: t.next, Expires: expires}
	t.table[leaseID{scope, key}] = l
	return l
}

// check reports ErrLeaseLost unless l is the record's current lease.
func (t *leases) check(l Lease) error {
	if l.Token == 0 || t.get(l.Scope, l.Key).Token != l.Token {
		return ErrLeaseLost
	}
	return nil
}

// set changes l's entry if l is still current.
func (t *leases) set(l Lease, update func(*Lease)) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := leaseID{l.Scope, l.Key}
	cur, ok := t.table[id]
	if !ok || l.Token == 0 || cur.Token != l.Token {
		return Lease{}, ErrLeaseLost
	}
	update(&cur)
	t.table[id] = cur
	return cur, nil
}

// release drops l's entry if l is still current. Tokens are journal-wide:
// the next claim's is greater without the entry.
func (t *leases) release(l Lease) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := leaseID{l.Scope, l.Key}
	if cur, ok := t.table[id]; !ok || l.Token == 0 || cur.Token != l.Token {
		return ErrLeaseLost
	}
	delete(t.table, id)
	return nil
}

// count returns the number of entries, live or expired.
func (t *leases) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.table)
}

func (t *leases) drop(scope, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.table, leaseID{scope, key})
}

// Claim takes the lease on the record for owner until expires, unless
// another owner holds a lease on it that is live at now: then it returns
// the record, that owner's lease and an error matching ErrLeased. A claim
// by the lease's own owner (a restart under the same name) takes it anew.
// Every claim gets a new, greater Token. A terminal record is returned
// with an error matching ErrTerminal and no lease: there is nothing left
// to drive.
//
// The record is read once the lease is taken: read before, a write of
// the previous holder's between the read and the claim (its lease
// expired, or released) handed the lease over with the record as it was
// before that write. Taken first, the lease fences any such write that
// has not checked its lease yet; one that has, in the round under way,
// is published when the round ends, and Claim waits for that before it
// reads (see claimAfterRound). So an Update's fn must not call Claim,
// of its own record or of any other: the round under way may be the
// fn's own, holding a leased write of the claimed record made before the
// fn ran, and the fn runs on the goroutine that ends it; Claim waits for
// it until ctx is done, and with a ctx never done every write waits too.
func (s *Store) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*Record, Lease, error) {
	if owner == "" {
		return nil, Lease{}, errorf("journal: claim: empty owner: %w", ErrInvalid)
	}
	if err := validateID(scope, key); err != nil {
		return nil, Lease{}, errorf("journal: claim: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, Lease{}, errorf("journal: claim: %w", err)
	}
	l, ended, lerr := s.leases.claimAfterRound(scope, key, owner, now, expires)
	if ended != nil {
		select {
		case <-ended:
		case <-ctx.Done():
			_ = s.leases.release(l) // nothing read under it
			return nil, Lease{}, errorf("journal: claim: %w", ctx.Err())
		}
	}
	if s.claimStep != nil {
		s.claimStep()
	}
	r, err := s.Get(ctx, scope, key)
	switch {
	case err != nil:
		if lerr == nil {
			_ = s.leases.release(l) // nothing to drive under it
		}
		return nil, Lease{}, errorf("journal: claim: %w", err)
	case r.State.Terminal():
		if lerr == nil {
			_ = s.leases.release(l)
		}
		return r, Lease{}, errorf("journal: claim %q: %w", key, ErrTerminal)
	case lerr != nil:
		return r, l, errorf("journal: claim %q: %w", key, lerr)
	}
	return r, l, nil
}

// CreateClaimed is Create with the new record leased to owner until
// expires, as Claim would lease it (idem.CreateClaimer): Submit journals
// its record and takes the lease without reading the record back. When
// (Scope, Key) exists it writes and leases nothing (a lease on it is left
// as it is) and returns the stored record with an error matching
// ErrExists, as Create does.
//
// The lease is granted in the commit that makes the record durable,
// before the record is visible to any reader: nobody (Run's ClaimDue)
// can claim it in between. A lease entry the key had is a stale one, of
// a record pruned since: it is replaced, which fences its holder.
func (s *Store) CreateClaimed(ctx context.Context, rec *Record, owner string, expires time.Time) (*Record, Lease, error) {
	if owner == "" {
		return nil, Lease{}, errorf("journal: create: empty owner: %w", ErrInvalid)
	}
	claim := &Lease{Owner: owner, Expires: expires}
	if rec != nil {
		claim.Scope, claim.Key = rec.Scope, rec.Key
	}
	return s.create(ctx, rec, claim)
}

// ClaimDue claims, for owner until expires, up to limit open records whose
// NextDue is not after now (limit <= 0 means all) and on which nobody, not
// even owner, holds a live lease (owner's own is a drive of its under
// way), soonest due first. A record that a write under its previous
// lease had passed its lease check for, in the commit under way, comes
// once that commit ends, as it then is (and not at all if the write
// settled it): as in Claim, a read before would miss the write.
func (s *Store) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]Claimed, error) {
	if owner == "" {
		return nil, errorf("journal: claim due: empty owner: %w", ErrInvalid)
	}
	// Leased records are skipped after the read: in one process they are
	// the few the Client drives right now. So the read stops at limit
	// records past as many as the table has leases: after an outage
	// thousands may be due, and decoding them all to claim a batch made
	// every pass cost the whole backlog. (A lease taken after the count
	// can only make this call claim fewer.)
	want := 0
	if limit > 0 {
		want = limit + s.leases.count()
	}
	due, err := s.Due(ctx, now, want)
	if err != nil {
		return nil, err
	}
	var out []Claimed
	var ended <-chan struct{}
	var stale []int // of out: a write of the record checked its lease in the round under way
	for _, r := range due {
		if limit > 0 && len(out) == limit {
			break
		}
		l, err := s.leases.claim(r.Scope, r.Key, owner, now, expires, false)
		if err != nil {
			continue
		}
		// As in Claim: the write is published when its round ends, after
		// this claim came too late to fence it. The last round found is
		// the latest: one at a time.
		if e := s.leases.checkedIn(r.Scope, r.Key); e != nil {
			ended = e
			stale = append(stale, len(out))
		}
		out = append(out, Claimed{Record: r, Lease: l})
	}
	if ended == nil {
		return out, nil
	}
	select {
	case <-ended:
	case <-ctx.Done():
		for _, c := range out {
			_ = s.leases.release(c.Lease) // nothing driven under them
		}
		return nil, errorf("journal: claim due: %w", ctx.Err())
	}
	kept := out[:0]
	for i, c := range out {
		if slices.Contains(stale, i) {
			r, err := s.Get(ctx, c.Record.Scope, c.Record.Key)
			if err != nil || r.State.Terminal() {
				// Settled (or gone) by that write: nothing to drive.
				_ = s.leases.release(c.Lease)
				continue
			}
			c.Record = r
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// Renew extends l to expires, if l is still the record's lease; otherwise
// the error matches ErrLeaseLost. The token stays the same.
func (s *Store) Renew(ctx context.Context, l Lease, expires time.Time) (Lease, error) {
	if err := s.usable(ctx); err != nil {
		return Lease{}, errorf("journal: renew: %w", err)
	}
	nl, err := s.leases.set(l, func(cur *Lease) { cur.Expires = expires })
	if err != nil {
		return Lease{}, errorf("journal: renew %q: %w", l.Key, err)
	}
	return nl, nil
}

// Release gives l up, if it is still the record's lease (otherwise the
// error matches ErrLeaseLost): any owner may claim the record at once.
// The token is kept, so that the next claim's is greater.
func (s *Store) Release(ctx context.Context, l Lease) error {
	if err := s.usable(ctx); err != nil {
		return errorf("journal: release: %w", err)
	}
	if err := s.leases.release(l); err != nil {
		return errorf("journal: release %q: %w", l.Key, err)
	}
	return nil
}

type leaseKey struct{}

// WithLease returns a copy of ctx that carries l: every write (Update,
// Resolve) made with it is made under the lease, and refused with an
// error matching ErrLeaseLost, without calling Update's function, once
// another owner has claimed the record. Writes whose context carries no
// lease (an operator's, a webhook's) are not fenced. A lease carried for
// another record than the one written is ErrInvalid.
func WithLease(ctx context.Context, l Lease) context.Context {
	if ctx == nil {
		panic("journal: WithLease of a nil context") // as context.WithValue
	}
	return &leaseCtx{Context: ctx, l: l}
}

// leaseCtx is WithLease's context: context.WithValue's, but one
// allocation where that was two (the context and the Lease boxed as its
// value), and a Client's drive makes one per write. LeaseFrom reads the
// lease straight from it; a context derived from it finds the lease
// through Value, as it found WithValue's.
type leaseCtx struct {
	context.Context
	l Lease
	// owned marks the client's own write (internal/owned): see
	// ownedUpdate. Set only by the mark, before the context is used.
	owned bool
	// like is the client's copy of the record the owned Update writes
	// (internal/owned.Like), or nil: see ownedLike.
	like *Record
}

// ownedUpdate reports whether ctx is a lease's context the client marked
// as its own (owned.Mark of WithLease's context, made for that one
// write): the Update's fn is the client's, which never changes the
// record's Body nor keeps it, and the client never changes the Body of
// the record Update hands back (updateOp.block). Any other context, one
// derived from a marked one included, is not.
func ownedUpdate(ctx context.Context) bool {
	c, ok := ctx.(*leaseCtx)
	return ok && c.owned
}

// ownedLike is the record the client named for the owned Update under
// ctx (internal/owned.Like), nil for any other context: its request
// strings and header are the decoded record's where the stored bytes
// hold the same (decoder.requestLike).
func ownedLike(ctx context.Context) *Record {
	if c, ok := ctx.(*leaseCtx); ok && c.owned {
		return c.like
	}
	return nil
}

// Value answers the lease's key itself, and any other through the
// context it wraps, which finds a cancelable parent by a key of its own.
func (c *leaseCtx) Value(key any) any {
	if key == (leaseKey{}) {
		return c.l
	}
	return c.Context.Value(key)
}

// LeaseFrom returns the lease ctx carries, if any (see WithLease).
func LeaseFrom(ctx context.Context) (Lease, bool) {
	if c, ok := ctx.(*leaseCtx); ok {
		return c.l, true
	}
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// CheckLease reports whether a write of (scope, key) with ctx may be made
// under the lease ctx carries, if any: ErrInvalid for a lease of another
// record or without a token. Stores call it before they look at the
// record, then compare the token with the record's.
func CheckLease(ctx context.Context, scope, key string) (Lease, bool, error) {
	l, ok := LeaseFrom(ctx)
	if !ok {
		return Lease{}, false, nil
	}
	if l.Scope != scope || l.Key != key || l.Token == 0 {
		return l, true, errorf("lease of %q/%q (token %d) for a write of %q/%q: %w", l.Scope, l.Key, l.Token, scope, key, ErrInvalid)
	}
	return l, true, nil
}

// fenced wraps fn, the function of a write of (scope, key) with ctx, so
// that it refuses the write once ctx's lease is no longer current. It is
// checked inside the commit (checkInRound): a claim made while the write
// waited for its commit fences it too.
func (s *Store) fenced(ctx context.Context, scope, key string, fn func(*Record) error) (func(*Record) error, error) {
	l, ok, err := s.fence(ctx, scope, key)
	if err != nil || !ok {
		return fn, err
	}
	return func(r *Record) error {
		if err := s.leases.checkInRound(l); err != nil {
			return err
		}
		return fn(r)
	}, nil
}

// fence returns the lease a write of (scope, key) with ctx is made under,
// if any (ok), after checking that it is still current. A write checks it
// again inside its commit (see fenced).
func (s *Store) fence(ctx context.Context, scope, key string) (l Lease, ok bool, err error) {
	l, ok, err = CheckLease(ctx, scope, key)
	if err != nil || !ok {
		return l, false, err
	}
	if err := s.leases.check(l); err != nil {
		return l, false, err
	}
	return l, true, nil
}

// settledUnder drops the lease ctx carries once its record is terminal:
// nothing is left to drive.
func (s *Store) settledUnder(ctx context.Context, r *Record) {
	if l, ok := LeaseFrom(ctx); ok && r.State.Terminal() {
		s.leases.drop(l.Scope, l.Key)
	}
}

// usable reports why s cannot be used now: closed, its file failed a
// commit (see commitBolt), or ctx done.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	return ctx.Err()
}
