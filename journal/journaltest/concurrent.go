package journaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// errMixed is the function's own error in ConcurrentMixed.
var errMixed = errors.New("fn refuses")

// testConcurrentMixed makes writes at once, which a Store may commit
// together (group commit), and checks that each gets its own answer: a
// refused or failing write fails alone, and a stale lease is fenced in a
// shared commit as in a lone one.
func testConcurrentMixed(t *testing.T, s idem.Store) {
	ctx := context.Background()
	const n = 16
	// Per i: "ok-i" is written under a's live lease; "stale-i" under a's
	// lease that b took over; "fnerr-i" by a function that fails;
	// "done-i" is settled; "dup-i" is created again.
	stale := make([]journal.Lease, n)
	live := make([]journal.Lease, n)
	for i := range n {
		for _, p := range []string{"ok", "stale", "fnerr", "done", "dup"} {
			create(t, s, NewRecord("acct", fmt.Sprintf("%s-%d", p, i), t0))
		}
		live[i] = claim(t, s, fmt.Sprintf("ok-%d", i), "a", t0, time.Minute)
		stale[i] = claim(t, s, fmt.Sprintf("stale-%d", i), "a", t0, time.Minute)
		claim(t, s, fmt.Sprintf("stale-%d", i), "b", t0.Add(time.Minute), time.Minute)
		settle(t, s, "acct", fmt.Sprintf("done-%d", i), t0)
	}
	before := make(map[string]*journal.Record)
	for i := range n {
		for _, p := range []string{"stale", "fnerr", "done", "dup"} {
			k := fmt.Sprintf("%s-%d", p, i)
			before[k] = get(t, s, "acct", k)
		}
	}

	// Each kind of write, and what it must answer.
	kinds := []struct {
		prefix string
		write  func(i int, called *bool) (*journal.Record, error)
		check  func(key string, rec *journal.Record, err error, called bool)
	}{
		{"ok", func(i int, called *bool) (*journal.Record, error) {
			return leasedUpdate(s, live[i], called)
		}, func(key string, rec *journal.Record, err error, _ bool) {
			require.NoError(t, err, "leased Update(%s)", key)
			require.Len(t, rec.Attempts, 1, "attempts of %s", key)
			require.Equal(t, rec, get(t, s, "acct", key), "stored %s", key)
		}},
		{"stale", func(i int, called *bool) (*journal.Record, error) {
			return leasedUpdate(s, stale[i], called)
		}, func(key string, _ *journal.Record, err error, called bool) {
			require.ErrorIs(t, err, journal.ErrLeaseLost, "stale Update(%s)", key)
			require.False(t, called, "fn called for the stale lease of %s", key)
		}},
		{"fnerr", func(i int, _ *bool) (*journal.Record, error) {
			return s.Update(ctx, "acct", fmt.Sprintf("fnerr-%d", i), func(r *journal.Record) error {
				r.Review = "must not stay"
				return errMixed
			})
		}, func(key string, _ *journal.Record, err error, _ bool) {
			require.ErrorIs(t, err, errMixed, "Update(%s) whose fn fails", key)
		}},
		{"done", func(i int, called *bool) (*journal.Record, error) {
			return s.Update(ctx, "acct", fmt.Sprintf("done-%d", i), func(*journal.Record) error {
				*called = true
				return nil
			})
		}, func(key string, _ *journal.Record, err error, called bool) {
			require.ErrorIs(t, err, journal.ErrTerminal, "Update(%s) of a settled record", key)
			require.False(t, called, "fn called for settled %s", key)
		}},
		{"dup", func(i int, _ *bool) (*journal.Record, error) {
			return s.Create(ctx, NewRecord("acct", fmt.Sprintf("dup-%d", i), t0.Add(time.Hour)))
		}, func(key string, rec *journal.Record, err error, _ bool) {
			require.ErrorIs(t, err, journal.ErrExists, "Create(%s) again", key)
			require.Equal(t, before[key], rec, "Create(%s) again returns the stored record", key)
		}},
	}
	type answer struct {
		kind, i int
		rec     *journal.Record
		err     error
		called  bool
	}
	answers := make(chan answer, len(kinds)*n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k, kind := range kinds {
		for i := range n {
			wg.Go(func() {
				<-start
				a := answer{kind: k, i: i}
				a.rec, a.err = kind.write(i, &a.called)
				answers <- a
			})
		}
	}
	close(start)
	wg.Wait()
	close(answers)
	for a := range answers {
		kind := kinds[a.kind]
		kind.check(fmt.Sprintf("%s-%d", kind.prefix, a.i), a.rec, a.err, a.called)
	}
	for k, want := range before {
		require.Equal(t, want, get(t, s, "acct", k), "%s after its refused write", k)
	}
	checkIndex(t, s)
}

// testCreateClaimed checks idem.CreateClaimer: the record and its lease in
// one write, a lease like any Claim's.
func testCreateClaimed(t *testing.T, s idem.Store) {
	cc, ok := s.(idem.CreateClaimer)
	if !ok {
		t.Skip("the Store does not implement idem.CreateClaimer")
	}
	ctx := context.Background()
	rec := NewRecord("acct", "k", t0)
	want := NewRecord("acct", "k", t0)
	got, la, err := cc.CreateClaimed(ctx, rec, "a", t0.Add(time.Minute))
	require.NoError(t, err, "CreateClaimed()")
	require.Equal(t, want, got, "CreateClaimed() returns the record")
	require.Equal(t, want, get(t, s, "acct", "k"), "Get() after CreateClaimed()")
	require.Equal(t, journal.Lease{Scope: "acct", Key: "k", Owner: "a", Token: la.Token, Expires: t0.Add(time.Minute)}, la, "lease")
	require.NotZero(t, la.Token, "token")

	// The lease is live: another owner is told who holds it.
	_, held, err := s.Claim(ctx, "acct", "k", "b", t0.Add(30*time.Second), t0.Add(2*time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() of a record created leased")
	require.Equal(t, "a", held.Owner, "holder")
	require.Equal(t, la.Token, held.Token, "holder's token")
	_, err = leasedUpdate(s, la, nil)
	require.NoError(t, err, "write under the created lease")

	// A second CreateClaimed of the key takes nothing.
	again, l, err := cc.CreateClaimed(ctx, NewRecord("acct", "k", t0.Add(time.Hour)), "b", t0.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrExists, "CreateClaimed() of an existing key")
	require.Equal(t, get(t, s, "acct", "k"), again, "CreateClaimed() of an existing key returns the stored record")
	require.Zero(t, l, "lease of a refused CreateClaimed()")
	_, err = leasedUpdate(s, la, nil)
	require.NoError(t, err, "write under the created lease after a refused CreateClaimed()")

	// Past its expiry another owner takes over, with a greater token, and
	// fences the creator.
	lb := claim(t, s, "k", "b", t0.Add(time.Minute), time.Minute)
	require.Greater(t, lb.Token, la.Token, "token of the takeover")
	called := false
	_, err = leasedUpdate(s, la, &called)
	require.ErrorIs(t, err, journal.ErrLeaseLost, "write under the created lease after a takeover")
	require.False(t, called, "fn called for a stale lease")

	_, _, err = cc.CreateClaimed(ctx, NewRecord("acct", "k2", t0), "", t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrInvalid, "CreateClaimed() without an owner")
	bad := NewRecord("acct", "k3", t0)
	bad.State = "done"
	_, _, err = cc.CreateClaimed(ctx, bad, "a", t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrInvalid, "CreateClaimed() of an invalid record")
	_, err = s.Get(ctx, "acct", "k2")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing stored by a refused CreateClaimed()")
}

// testCreateClaimedConcurrent: concurrent CreateClaimed calls and the
// first leased writes; callers of one key, of whom one gets the lease.
func testCreateClaimedConcurrent(t *testing.T, s idem.Store) {
	cc, ok := s.(idem.CreateClaimer)
	if !ok {
		t.Skip("the Store does not implement idem.CreateClaimer")
	}
	ctx := context.Background()
	const n, same = 24, 8
	type answer struct {
		owner string
		rec   *journal.Record
		l     journal.Lease
		err   error
	}
	answers := make(chan answer, n+same)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			a := answer{owner: fmt.Sprintf("o%d", i)}
			a.rec, a.l, a.err = cc.CreateClaimed(ctx, NewRecord("acct", fmt.Sprintf("k%02d", i), t0), a.owner, t0.Add(time.Minute))
			if a.err == nil {
				// Then the drive's first write, under the lease.
				_, a.err = leasedUpdate(s, a.l, nil)
			}
			answers <- a
		})
	}
	// Callers of one key: one gets the record and its lease, the others
	// the record without one.
	for i := range same {
		wg.Go(func() {
			<-start
			a := answer{owner: fmt.Sprintf("s%d", i)}
			a.rec, a.l, a.err = cc.CreateClaimed(ctx, NewRecord("acct", "same", t0), a.owner, t0.Add(time.Minute))
			answers <- a
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	var winners []answer
	for a := range answers {
		if a.owner[0] == 'o' {
			require.NoError(t, a.err, "CreateClaimed() and a leased Update() by %s", a.owner)
			continue
		}
		if a.err == nil {
			winners = append(winners, a)
			continue
		}
		require.ErrorIs(t, a.err, journal.ErrExists, "CreateClaimed() of a key another caller created")
		require.Equal(t, "same", a.rec.Key)
		require.Zero(t, a.l, "lease of a refused CreateClaimed()")
	}
	require.Len(t, winners, 1, "callers of one key given its lease")
	_, held, err := s.Claim(ctx, "acct", "same", "x", t0, t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() of the key created leased")
	require.Equal(t, winners[0].owner, held.Owner, "holder of the key's lease")
	for i := range n {
		require.Len(t, get(t, s, "acct", fmt.Sprintf("k%02d", i)).Attempts, 1, "attempts of k%02d", i)
	}
	checkIndex(t, s)
}
