package idem_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// memStore is an in-memory idem.Store for the model-based test: a bbolt
// journal, even without fsync, costs most of a history's time under -race.
// It keeps the Store contract (deep copies, ErrTerminal, ErrInvalid for a
// changed request) and passes the conformance suite
// (TestModelStoreConformance), so the client cannot tell it from the
// journal except by speed.
type memStore struct {
	mu     sync.Mutex
	recs   map[string]*journal.Record
	leases map[string]journal.Lease
	tokens uint64 // last token handed out
	closed bool
}

func newMemStore() *memStore {
	return &memStore{recs: make(map[string]*journal.Record), leases: make(map[string]journal.Lease)}
}

var _ idem.Store = (*memStore)(nil)

func memKey(scope, key string) string { return scope + "\x00" + key }

func (s *memStore) check(ctx context.Context) error {
	if s.closed {
		return journal.ErrClosed
	}
	return ctx.Err()
}

func validRecord(r *journal.Record) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: nil record", journal.ErrInvalid)
	case r.Scope == "" || r.Key == "" || strings.ContainsRune(r.Scope, 0) || strings.ContainsRune(r.Key, 0):
		return fmt.Errorf("%w: empty scope or key, or a NUL in one", journal.ErrInvalid)
	case !r.State.Valid():
		return fmt.Errorf("%w: state %q", journal.ErrInvalid, r.State)
	case r.BodySHA != sha256.Sum256(r.Body):
		return fmt.Errorf("%w: BodySHA is not the body's digest", journal.ErrInvalid)
	case r.State.Terminal() && r.Settled.IsZero():
		return fmt.Errorf("%w: terminal without a Settled time", journal.ErrInvalid)
	case r.Resolved != nil && !r.State.Terminal():
		return fmt.Errorf("%w: a manual resolution must leave the record terminal", journal.ErrInvalid)
	}
	return nil
}

func (s *memStore) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := validRecord(rec); err != nil {
		return nil, err
	}
	k := memKey(rec.Scope, rec.Key)
	if old, ok := s.recs[k]; ok {
		return cloneRecord(old), fmt.Errorf("%w: scope %q, key %q", journal.ErrExists, rec.Scope, rec.Key)
	}
	s.recs[k] = cloneRecord(rec)
	return cloneRecord(rec), nil
}

func (s *memStore) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	r, err := s.stored(scope, key)
	if err != nil {
		return nil, err
	}
	return cloneRecord(r), nil
}

// stored is the record under scope and key, s.mu held, not a copy.
func (s *memStore) stored(scope, key string) (*journal.Record, error) {
	r, ok := s.recs[memKey(scope, key)]
	if !ok {
		return nil, fmt.Errorf("%w: scope %q, key %q", journal.ErrNotFound, scope, key)
	}
	return r, nil
}

// sameRequestFields reports whether fn left alone what Update must not
// change: the request, Created and a manual resolution.
func sameRequestFields(a, b *journal.Record) bool {
	return a.Scope == b.Scope && a.Key == b.Key && a.Method == b.Method && a.URL == b.URL &&
		a.QueryURL == b.QueryURL && bytes.Equal(a.Body, b.Body) && a.BodySHA == b.BodySHA &&
		a.Created.Equal(b.Created) && a.Ref == b.Ref &&
		maps.EqualFunc(a.Header, b.Header, slices.Equal[[]string]) && a.Resolved == nil && b.Resolved == nil &&
		slices.Equal(a.Confirmations, b.Confirmations)
}

func (s *memStore) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := s.fenced(ctx, scope, key); err != nil {
		return nil, err
	}
	old, err := s.stored(scope, key)
	if err != nil {
		return nil, err
	}
	if old.State.Terminal() {
		return nil, fmt.Errorf("%w: scope %q, key %q", journal.ErrTerminal, scope, key)
	}
	cp := cloneRecord(old)
	if err := fn(cp); err != nil {
		return nil, err
	}
	if err := validRecord(cp); err != nil {
		return nil, err
	}
	if !sameRequestFields(old, cp) {
		return nil, fmt.Errorf("%w: Update changed the request of scope %q, key %q", journal.ErrInvalid, scope, key)
	}
	s.recs[memKey(scope, key)] = cloneRecord(cp)
	return cloneRecord(cp), nil
}

func (s *memStore) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := journal.CheckManual(m); err != nil {
		return nil, err
	}
	if err := s.fenced(ctx, scope, key); err != nil {
		return nil, err
	}
	old, err := s.stored(scope, key)
	if err != nil {
		return nil, err
	}
	if err := journal.CheckResolve(old, m); err != nil {
		return nil, fmt.Errorf("%w: scope %q, key %q", err, scope, key)
	}
	r := cloneRecord(old)
	res := r.Result
	if res == nil {
		res = &journal.Result{}
		r.Result = res
	}
	if m.ResourceID != "" {
		res.ResourceID = m.ResourceID
	}
	res.Reason = m.Reason
	r.Resolved = &journal.Resolution{By: m.By, Reason: m.Reason, At: m.At, From: r.State}
	r.State, r.Review, r.Settled, r.Updated = m.State, "", m.At, m.At
	s.recs[memKey(scope, key)] = r
	return cloneRecord(r), nil
}

// Confirm applies the journal's own decision, as every Store must.
func (s *memStore) Confirm(ctx context.Context, scope, key string, c journal.Confirmation) (*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if scope == "" || key == "" {
		return nil, fmt.Errorf("%w: empty scope or key", journal.ErrInvalid)
	}
	old, err := s.stored(scope, key)
	if err != nil {
		return nil, err
	}
	r := cloneRecord(old)
	effect, err := journal.ApplyConfirmation(r, c)
	switch {
	case effect == journal.ConfirmDuplicate:
		return cloneRecord(old), errors.Join(journal.ErrExists, err)
	case !effect.Changed():
		return nil, err
	}
	s.recs[memKey(scope, key)] = r
	return cloneRecord(r), err
}

// openSorted returns copies of the open records, soonest due first.
// A nil by means no bound.
func (s *memStore) openSorted(by *time.Time, limit int) []*journal.Record {
	var out []*journal.Record
	for _, r := range s.recs {
		if r.Open() && (by == nil || !r.NextDue.After(*by)) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *journal.Record) int {
		if c := a.NextDue.Compare(b.NextDue); c != 0 {
			return c
		}
		return cmp.Compare(memKey(a.Scope, a.Key), memKey(b.Scope, b.Key))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	for i, r := range out {
		out[i] = cloneRecord(r)
	}
	return out
}

func (s *memStore) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	s.mu.Lock()
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	open := s.openSorted(nil, 0)
	s.mu.Unlock()
	for _, r := range open {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Due(ctx context.Context, by time.Time, limit int) ([]*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.openSorted(&by, limit), nil
}

// fenced refuses a write whose context carries a lease that is no longer
// the record's. s.mu is held.
func (s *memStore) fenced(ctx context.Context, scope, key string) error {
	l, ok, err := journal.CheckLease(ctx, scope, key)
	if err != nil || !ok {
		return err
	}
	if s.leases[memKey(scope, key)].Token != l.Token {
		return fmt.Errorf("%w: scope %q, key %q", journal.ErrLeaseLost, scope, key)
	}
	return nil
}

// claim takes the lease of the open record k for owner; again: even if
// owner's own lease is live. s.mu is held.
func (s *memStore) claim(k, owner string, now, expires time.Time, again bool) (journal.Lease, error) {
	if cur := s.leases[k]; cur.Held(owner, now) || !again && cur.Owner != "" && now.Before(cur.Expires) {
		return cur, fmt.Errorf("%w: %s holds it", journal.ErrLeased, cur.Owner)
	}
	r := s.recs[k]
	s.tokens++
	l := journal.Lease{Scope: r.Scope, Key: r.Key, Owner: owner, Token: s.tokens, Expires: expires}
	s.leases[k] = l
	return l, nil
}

func (s *memStore) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, journal.Lease{}, err
	}
	if owner == "" || scope == "" || key == "" || strings.ContainsRune(scope, 0) || strings.ContainsRune(key, 0) {
		return nil, journal.Lease{}, fmt.Errorf("%w: empty owner, scope or key, or a NUL in one", journal.ErrInvalid)
	}
	k := memKey(scope, key)
	r, ok := s.recs[k]
	switch {
	case !ok:
		return nil, journal.Lease{}, fmt.Errorf("%w: scope %q, key %q", journal.ErrNotFound, scope, key)
	case r.State.Terminal():
		return cloneRecord(r), journal.Lease{}, fmt.Errorf("%w: scope %q, key %q", journal.ErrTerminal, scope, key)
	}
	l, err := s.claim(k, owner, now, expires, true)
	return cloneRecord(r), l, err
}

func (s *memStore) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, fmt.Errorf("%w: empty owner", journal.ErrInvalid)
	}
	var out []journal.Claimed
	for _, r := range s.openSorted(&now, 0) {
		if limit > 0 && len(out) == limit {
			break
		}
		if l, err := s.claim(memKey(r.Scope, r.Key), owner, now, expires, false); err == nil {
			out = append(out, journal.Claimed{Record: r, Lease: l})
		}
	}
	return out, nil
}

func (s *memStore) Renew(ctx context.Context, l journal.Lease, expires time.Time) (journal.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return journal.Lease{}, err
	}
	k := memKey(l.Scope, l.Key)
	cur, ok := s.leases[k]
	if !ok || l.Token == 0 || cur.Token != l.Token {
		return journal.Lease{}, fmt.Errorf("%w: scope %q, key %q", journal.ErrLeaseLost, l.Scope, l.Key)
	}
	cur.Expires = expires
	s.leases[k] = cur
	return cur, nil
}

func (s *memStore) Release(ctx context.Context, l journal.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	k := memKey(l.Scope, l.Key)
	if cur, ok := s.leases[k]; !ok || l.Token == 0 || cur.Token != l.Token {
		return fmt.Errorf("%w: scope %q, key %q", journal.ErrLeaseLost, l.Scope, l.Key)
	}
	delete(s.leases, k)
	return nil
}

// nextDue returns the earliest NextDue of an open record, and whether every
// open record is flagged for review; ok is false when none is open.
func (s *memStore) nextDue() (due time.Time, allFlagged, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	allFlagged = true
	for _, r := range s.recs {
		if !r.Open() {
			continue
		}
		if !ok || r.NextDue.Before(due) {
			due, ok = r.NextDue, true
		}
		if r.Review == "" {
			allFlagged = false
		}
	}
	return due, allFlagged, ok
}

// peek calls fn with the stored record itself (not a copy), under the lock;
// fn must not keep or change it.
func (s *memStore) peek(scope, key string, fn func(*journal.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.recs[memKey(scope, key)])
}

func (s *memStore) List(ctx context.Context, f journal.Filter) ([]*journal.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if strings.ContainsRune(f.After.Scope, 0) || strings.ContainsRune(f.After.Key, 0) {
		return nil, fmt.Errorf("NUL byte in Filter.After: %w", journal.ErrInvalid)
	}
	keys := slices.Sorted(maps.Keys(s.recs))
	var out []*journal.Record
	for _, k := range keys {
		r := s.recs[k]
		if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
			continue
		}
		if (f.Scope != "" && r.Scope != f.Scope) || (f.Open && !r.Open()) {
			continue
		}
		if f.After != (journal.Position{}) && k <= memKey(f.After.Scope, f.After.Key) {
			continue
		}
		if f.Review && r.Review == "" {
			continue
		}
		if !f.CreatedBefore.IsZero() && !r.Created.Before(f.CreatedBefore) {
			continue
		}
		out = append(out, cloneRecord(r))
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

func (s *memStore) Prune(ctx context.Context, settledBefore time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n := 0
	for k, r := range s.recs {
		if r.Prunable(settledBefore) {
			delete(s.recs, k)
			n++
		}
	}
	return n, nil
}

func (s *memStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func cloneRecord(r *journal.Record) *journal.Record {
	cp := *r
	cp.Header = cloneHeader(r.Header)
	cp.Body = bytes.Clone(r.Body)
	cp.Attempts = slices.Clone(r.Attempts)
	cp.Confirmations = slices.Clone(r.Confirmations)
	if r.Result != nil {
		res := *r.Result
		res.Body = bytes.Clone(r.Result.Body)
		cp.Result = &res
	}
	if r.Resolved != nil {
		res := *r.Resolved
		cp.Resolved = &res
	}
	return &cp
}

func cloneHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	return h.Clone()
}

// The model-based test trusts memStore to behave as the journal does: it
// must pass the suite every Store passes.
func TestModelStoreConformance(t *testing.T) {
	journaltest.Run(t, func(testing.TB) idem.Store { return newMemStore() })
}
