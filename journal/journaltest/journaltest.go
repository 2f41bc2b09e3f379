// Package journaltest is the conformance suite for idem's journal: every
// implementation of [idem.Store] must pass [Run], the bbolt journal of
// package [journal] included.
//
// Run checks what the client relies on, each in a named subtest: Create
// refuses a second record under the same scope and key and returns the
// stored one ([journal.ErrExists]); Get and Update report a
// missing record ([journal.ErrNotFound]); Update never calls its function
// on a terminal record ([journal.ErrTerminal]) and refuses changes to the
// request ([journal.ErrInvalid]); every returned record is the caller's
// own copy; Due, ForEachOpen and List see exactly the open records they
// should; Prune deletes only settled records; concurrent writers lose
// nothing; a cancelled context and a closed Store fail cleanly; Confirm
// settles, agrees, refuses duplicates ([journal.ErrExists]) and records
// contradictions ([journal.ErrConfirmConflict]) as
// [journal.ApplyConfirmation] decides, atomically.
//
// Leases (see [idem.Store]): Claim hands out tokens that grow on every
// claim and refuses a live lease of another owner ([journal.ErrLeased]);
// a write whose context carries a lease another claim has replaced is
// refused ([journal.ErrLeaseLost]) without calling its function; an
// expired lease is taken over; Renew and Release work only for the
// current lease; ClaimDue skips records leased by others, and concurrent
// ClaimDue calls never hand one record to two owners. Writes made at once
// (which a Store may commit together) each get their own answer; a Store
// that implements [idem.CreateClaimer] creates a record with a lease like
// any Claim's. A Store that implements [idem.KeyIgnoringStore] reads back
// each endpoint added, once, and never says nil for one it does not keep
// (past its bound: [journal.ErrKeyIgnoringFull]).
//
// [NewerOpenRecord] checks, on a Store holding a record a newer idem
// wrote, that the scans of open records skip it and that its key stays
// refused ([journal.ErrVersion]); a Store's test plants that record.
// [NewerListed] checks that List leaves such records out, settled and
// open, and Stats counts them (on records [CreateNewerListRecords] wrote,
// [NewerListKeys] planted).
//
// Call it from a test of the implementation, with a function that opens a
// new, empty Store:
//
//	func TestConformance(t *testing.T) {
//		journaltest.Run(t, func(t testing.TB) idem.Store {
//			return openMyStore(t, filepath.Join(t.TempDir(), "journal"))
//		})
//	}
package journaltest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// T0 is the suite's fixed clock: a Store never reads the clock itself.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs the conformance suite. open must return a new, empty Store for
// each call; Run closes every Store it opens, and open may register
// further checks (such as reopening the file) with t.Cleanup.
func Run(t *testing.T, open func(t testing.TB) idem.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, idem.Store)
	}{
		{"CreateGet", testCreateGet},
		{"CreateExists", testCreateExists},
		{"CreateInvalid", testCreateInvalid},
		{"GetNotFound", testGetNotFound},
		{"Update", testUpdate},
		{"UpdateFnError", testUpdateFnError},
		{"UpdateNotFound", testUpdateNotFound},
		{"UpdateTerminal", testUpdateTerminal},
		{"UpdateInvalid", testUpdateInvalid},
		{"KeyPlacement", testKeyPlacement},
		{"Resolve", testResolve},
		{"ResolveTerminal", testResolveTerminal},
		{"ResolveOnlyOpen", testResolveOnlyOpen},
		{"ResolveUnlessFlaggedKeyIgnored", testResolveUnlessFlaggedKeyIgnored},
		{"ResolveInvalid", testResolveInvalid},
		{"DeepCopy", testDeepCopy},
		{"OpenIndex", testOpenIndex},
		{"DueLimit", testDueLimit},
		{"ForEachOpenUpdates", testForEachOpenUpdates},
		{"ForEachOpenStops", testForEachOpenStops},
		{"List", testList},
		{"Prune", testPrune},
		{"PruneByLatestTime", testPruneByLatestTime},
		{"ConcurrentWriters", testConcurrentWriters},
		{"CancelledContext", testCancelledContext},
		{"Closed", testClosed},
		{"LeaseClaim", testLeaseClaim},
		{"LeaseFencing", testLeaseFencing},
		{"LeaseTakeover", testLeaseTakeover},
		{"LeaseRenewRelease", testLeaseRenewRelease},
		{"LeaseTerminal", testLeaseTerminal},
		{"LeaseInvalid", testLeaseInvalid},
		{"ClaimDue", testClaimDue},
		{"ClaimDueConcurrent", testClaimDueConcurrent},
		// Writes made at once, which a Store may commit together (group
		// commit), each get their own answer. The CreateClaimed cases
		// run only on a Store that implements idem.CreateClaimer.
		{"ConcurrentMixed", testConcurrentMixed},
		{"CreateClaimed", testCreateClaimed},
		{"CreateClaimedConcurrent", testCreateClaimedConcurrent},
		// Only on a Store that implements idem.KeyIgnoringStore.
		{"KeyIgnoring", testKeyIgnoring},
	}
	tests = append(tests, confirmTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tt.fn(t, s)
		})
	}
}

// NewRecord returns a valid pending record with a body, a header and
// NextDue at due, as a client would journal it.
func NewRecord(scope, key string, due time.Time) *journal.Record {
	body := []byte(fmt.Sprintf(`{"order":%q,"amount":1250}`, key))
	return &journal.Record{
		Scope:    scope,
		Key:      key,
		Ref:      "ref-" + key,
		Method:   http.MethodPost,
		URL:      "https://api.example.com/v1/orders",
		QueryURL: "https://api.example.com/v1/orders/by-key/" + key,
		Header:   http.Header{"Content-Type": {"application/json"}},
		Body:     body,
		BodySHA:  sha256.Sum256(body),
		State:    journal.StatePending,
		Created:  t0,
		Updated:  t0,
		NextDue:  due,
	}
}

func create(t testing.TB, s idem.Store, rec *journal.Record) *journal.Record {
	t.Helper()
	got, err := s.Create(context.Background(), rec)
	require.NoError(t, err, "Create(%s)", rec.Key)
	return got
}

func get(t testing.TB, s idem.Store, scope, key string) *journal.Record {
	t.Helper()
	got, err := s.Get(context.Background(), scope, key)
	require.NoError(t, err, "Get(%s, %s)", scope, key)
	return got
}

// settle makes an open record succeeded at the given time through Update.
func settle(t testing.TB, s idem.Store, scope, key string, at time.Time) *journal.Record {
	t.Helper()
	got, err := s.Update(context.Background(), scope, key, func(r *journal.Record) error {
		r.State = journal.StateSucceeded
		r.Settled, r.Updated = at, at
		r.Result = &journal.Result{ResourceID: "res-" + key, StatusCode: 201, Body: []byte(`{"id":1}`)}
		return nil
	})
	require.NoError(t, err, "Update(%s) to succeeded", key)
	return got
}

func keys(recs []*journal.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Scope + "/" + r.Key
	}
	return out
}

func testCreateGet(t *testing.T, s idem.Store) {
	rec := NewRecord("acct", "k1", t0)
	rec.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Wrote: true}}
	want := NewRecord("acct", "k1", t0)
	want.Attempts = slices.Clone(rec.Attempts)

	got := create(t, s, rec)
	require.Equal(t, want, got, "Create() returned record")
	require.Equal(t, want, get(t, s, "acct", "k1"), "Get() after Create")
	// Same key in another scope is another record.
	other := create(t, s, NewRecord("acct2", "k1", t0))
	require.Equal(t, "acct2", other.Scope)
	require.Equal(t, want, get(t, s, "acct", "k1"), "Get() after Create in another scope")
}

func testCreateExists(t *testing.T, s idem.Store) {
	first := create(t, s, NewRecord("acct", "k1", t0))
	second := NewRecord("acct", "k1", t0.Add(time.Hour))
	second.Body = []byte("different")
	second.BodySHA = sha256.Sum256(second.Body)

	got, err := s.Create(context.Background(), second)
	require.ErrorIs(t, err, journal.ErrExists, "Create() of an existing key")
	require.Equal(t, first, got, "Create() of an existing key returns the stored record")
	require.Equal(t, first, get(t, s, "acct", "k1"), "stored record unchanged")
}

func testCreateInvalid(t *testing.T, s idem.Store) {
	tests := []struct {
		name   string
		mutate func(*journal.Record)
	}{
		{"empty scope", func(r *journal.Record) { r.Scope = "" }},
		{"empty key", func(r *journal.Record) { r.Key = "" }},
		{"NUL in scope", func(r *journal.Record) { r.Scope = "a\x00b" }},
		{"NUL in key", func(r *journal.Record) { r.Key = "a\x00b" }},
		{"invalid state", func(r *journal.Record) { r.State = "done" }},
		{"empty state", func(r *journal.Record) { r.State = "" }},
		{"wrong BodySHA", func(r *journal.Record) { r.BodySHA[0] ^= 1 }},
		{"body without BodySHA", func(r *journal.Record) { r.BodySHA = [32]byte{} }},
		{"terminal without Settled", func(r *journal.Record) { r.State = journal.StateFailed }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := NewRecord("acct", "bad", t0)
			tt.mutate(rec)
			_, err := s.Create(context.Background(), rec)
			require.ErrorIs(t, err, journal.ErrInvalid, "Create()")
		})
	}
	_, err := s.Get(context.Background(), "acct", "bad")
	require.ErrorIs(t, err, journal.ErrNotFound, "Get() after invalid Creates")
	_, err = s.Create(context.Background(), nil)
	require.ErrorIs(t, err, journal.ErrInvalid, "Create(nil)")
}

func testGetNotFound(t *testing.T, s idem.Store) {
	_, err := s.Get(context.Background(), "acct", "missing")
	require.ErrorIs(t, err, journal.ErrNotFound)
	create(t, s, NewRecord("acct", "k", t0))
	_, err = s.Get(context.Background(), "other", "k")
	require.ErrorIs(t, err, journal.ErrNotFound, "Get() in another scope")
}

func testUpdate(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	at := t0.Add(time.Second)
	var seen journal.State // fn may run on another goroutine: assert after
	got, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		seen = r.State
		r.State = journal.StateProcessing
		r.FirstSent = at
		r.Updated = at
		r.NextDue = at.Add(time.Minute)
		r.Attempts = append(r.Attempts, journal.Attempt{
			Number: 1, Kind: journal.AttemptSubmit, Start: at, Wrote: true, Done: true,
			Status: 409, RetryAfter: 2 * time.Second, Duration: 30 * time.Millisecond,
		})
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, journal.StatePending, seen, "fn saw the stored state")
	require.Equal(t, journal.StateProcessing, got.State)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, got, get(t, s, "acct", "k"), "Get() after Update")

	due, err := s.Due(context.Background(), at.Add(time.Minute), 0)
	require.NoError(t, err)
	require.Equal(t, []string{"acct/k"}, keys(due), "Due() at the new NextDue")
	due, err = s.Due(context.Background(), at.Add(time.Minute-1), 0)
	require.NoError(t, err)
	require.Empty(t, due, "Due() just before the new NextDue")
}

func testUpdateFnError(t *testing.T, s idem.Store) {
	want := create(t, s, NewRecord("acct", "k", t0))
	boom := errors.New("boom")
	_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		r.State = journal.StateUnknown
		r.Review = "should not stick"
		return boom
	})
	require.ErrorIs(t, err, boom, "Update() returns fn's error")
	require.Equal(t, want, get(t, s, "acct", "k"), "nothing written when fn fails")
}

func testUpdateNotFound(t *testing.T, s idem.Store) {
	called := false
	_, err := s.Update(context.Background(), "acct", "missing", func(*journal.Record) error {
		called = true
		return nil
	})
	require.ErrorIs(t, err, journal.ErrNotFound)
	require.False(t, called, "fn called for a missing record")
}

func testUpdateTerminal(t *testing.T, s idem.Store) {
	for _, st := range []journal.State{journal.StateSucceeded, journal.StateFailed} {
		t.Run(string(st), func(t *testing.T) {
			key := "k-" + string(st)
			create(t, s, NewRecord("acct", key, t0))
			want, err := s.Update(context.Background(), "acct", key, func(r *journal.Record) error {
				r.State = st
				r.Settled = t0.Add(time.Second)
				return nil
			})
			require.NoError(t, err)
			called := false
			_, err = s.Update(context.Background(), "acct", key, func(r *journal.Record) error {
				called = true
				r.State = journal.StatePending
				return nil
			})
			require.ErrorIs(t, err, journal.ErrTerminal, "Update() of a %s record", st)
			require.False(t, called, "fn called for a terminal record")
			require.Equal(t, want, get(t, s, "acct", key))
		})
	}
}

func testUpdateInvalid(t *testing.T, s idem.Store) {
	tests := []struct {
		name string
		fn   func(*journal.Record)
	}{
		{"change Scope", func(r *journal.Record) { r.Scope = "other" }},
		{"change Key", func(r *journal.Record) { r.Key = "other" }},
		{"invalid state", func(r *journal.Record) { r.State = "done" }},
		{"terminal without Settled", func(r *journal.Record) { r.State = journal.StateSucceeded }},
		{"Body changed in place", func(r *journal.Record) { r.Body[0] ^= 1 }},
		{"Body and BodySHA replaced", func(r *journal.Record) {
			r.Body = []byte("other")
			r.BodySHA = sha256.Sum256(r.Body)
		}},
		{"BodySHA broken", func(r *journal.Record) { r.BodySHA[3] ^= 1 }},
		{"change URL", func(r *journal.Record) { r.URL = "https://elsewhere.example.com/" }},
	}
	want := create(t, s, NewRecord("acct", "k", t0))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
				tt.fn(r)
				return nil
			})
			require.ErrorIs(t, err, journal.ErrInvalid, "Update()")
			require.Equal(t, want, get(t, s, "acct", "k"), "nothing written")
		})
	}
}

// testKeyPlacement: where the key goes is kept as created: a Client
// that puts it elsewhere must find the record's own placement to refuse
// to send it (idem.ReviewKeyMoved).
func testKeyPlacement(t *testing.T, s idem.Store) {
	ctx := context.Background()
	rec := NewRecord("acct", "k", t0)
	rec.KeyPlacement = "header Paypal-Request-Id"
	create(t, s, rec)
	require.Equal(t, "header Paypal-Request-Id", get(t, s, "acct", "k").KeyPlacement, "Get after Create")
	got, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error {
		r.Attempts = append(r.Attempts, journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: t0})
		return nil
	})
	require.NoError(t, err, "Update()")
	require.Equal(t, "header Paypal-Request-Id", got.KeyPlacement, "Update's record")
	require.Equal(t, "header Paypal-Request-Id", get(t, s, "acct", "k").KeyPlacement, "Get after Update")
}

func testResolve(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		r.State = journal.StateUnknown
		r.Review = "key expired"
		r.Result = &journal.Result{StatusCode: 500, Body: []byte("oops"), Reason: "server error"}
		return nil
	})
	require.NoError(t, err)

	at := t0.Add(48 * time.Hour)
	m := journal.Manual{State: journal.StateSucceeded, ResourceID: "ord_1", Reason: "seen in the dashboard", By: "alice", At: at}
	got, err := s.Resolve(context.Background(), "acct", "k", m)
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Empty(t, got.Review, "Review cleared")
	require.Equal(t, at, got.Settled, "Settled")
	require.Equal(t, at, got.Updated, "Updated")
	require.Equal(t, &journal.Result{ResourceID: "ord_1", StatusCode: 500, Body: []byte("oops"), Reason: "seen in the dashboard"}, got.Result)
	require.Equal(t, &journal.Resolution{By: "alice", Reason: "seen in the dashboard", At: at, From: journal.StateUnknown}, got.Resolved)
	require.Equal(t, got, get(t, s, "acct", "k"), "Get() after Resolve")

	due, err := s.Due(context.Background(), at.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Empty(t, due, "Due() after Resolve")
	_, err = s.Resolve(context.Background(), "acct", "missing", m)
	require.ErrorIs(t, err, journal.ErrNotFound, "Resolve() of a missing record")
}

func testResolveTerminal(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	settle(t, s, "acct", "k", t0.Add(time.Second))
	at := t0.Add(time.Hour)
	got, err := s.Resolve(context.Background(), "acct", "k", journal.Manual{
		State: journal.StateFailed, Reason: "refunded by hand", By: "bob", At: at,
	})
	require.NoError(t, err, "Resolve() of a terminal record")
	require.Equal(t, journal.StateFailed, got.State)
	require.Equal(t, journal.StateSucceeded, got.Resolved.From)
	require.Equal(t, 201, got.Result.StatusCode, "server's status code kept")
	require.Equal(t, "res-k", got.Result.ResourceID, "an empty Manual.ResourceID keeps the recorded one")

	// The settled time moved: pruning between the two times keeps it.
	n, err := s.Prune(context.Background(), t0.Add(time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "Prune() before the new Settled time")
	n, err = s.Prune(context.Background(), at.Add(time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, 1, n, "Prune() after the new Settled time")
}

// testResolveOnlyOpen: a resolution meant for an open operation never
// overwrites an outcome that landed before its transaction read the record.
func testResolveOnlyOpen(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "open", t0))
	got, err := s.Resolve(context.Background(), "acct", "open", journal.Manual{
		State: journal.StateFailed, Reason: "cancelled upstream", By: "bob", At: t0.Add(time.Hour), OnlyOpen: true,
	})
	require.NoError(t, err, "Resolve(OnlyOpen) of an open record")
	require.Equal(t, journal.StateFailed, got.State)

	create(t, s, NewRecord("acct", "k", t0))
	settle(t, s, "acct", "k", t0.Add(time.Second))
	want := get(t, s, "acct", "k")
	_, err = s.Resolve(context.Background(), "acct", "k", journal.Manual{
		State: journal.StateFailed, Reason: "looked stuck", By: "bob", At: t0.Add(time.Hour), OnlyOpen: true,
	})
	require.ErrorIs(t, err, journal.ErrTerminal, "Resolve(OnlyOpen) of a settled record")
	require.Equal(t, want, get(t, s, "acct", "k"), "nothing written")
}

// A resolution made UnlessFlaggedKeyIgnored, by a client that read the
// record unflagged, writes nothing over a ReviewKeyIgnored flag another
// replica set since (the flag may be the endpoint's one trace, which the
// client journals first), and settles a record not so flagged as any
// resolution does.
func testResolveUnlessFlaggedKeyIgnored(t *testing.T, s idem.Store) {
	m := journal.Manual{State: journal.StateSucceeded, ResourceID: "pay_1", Reason: "found in the dashboard", By: "ops", At: t0.Add(time.Hour)}
	settleUnlessFlaggedKeyIgnored(t, s, func(key string, unless bool) (*journal.Record, error) {
		return s.Resolve(context.Background(), "acct", key, m.UnlessFlaggedKeyIgnored(unless))
	})
}

func testResolveInvalid(t *testing.T, s idem.Store) {
	want := create(t, s, NewRecord("acct", "k", t0))
	valid := journal.Manual{State: journal.StateFailed, Reason: "r", By: "op", At: t0}
	tests := []struct {
		name   string
		mutate func(*journal.Manual)
	}{
		{"open state", func(m *journal.Manual) { m.State = journal.StateUnknown }},
		{"invalid state", func(m *journal.Manual) { m.State = "done" }},
		{"no reason", func(m *journal.Manual) { m.Reason = "" }},
		{"no time", func(m *journal.Manual) { m.At = time.Time{} }},
		// Every later write of the record rewrites these, and every
		// operator tool prints them: a confirmation's bounds.
		{"long reason", func(m *journal.Manual) { m.Reason = strings.Repeat("r", 1025) }},
		{"long by", func(m *journal.Manual) { m.By = strings.Repeat("b", 256) }},
		{"long resource id", func(m *journal.Manual) { m.ResourceID = strings.Repeat("o", 2049) }},
		{"control character in by", func(m *journal.Manual) { m.By = "ann\nbob" }},
		{"reason not UTF-8", func(m *journal.Manual) { m.Reason = "paid\xff" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid
			tt.mutate(&m)
			_, err := s.Resolve(context.Background(), "acct", "k", m)
			require.ErrorIs(t, err, journal.ErrInvalid)
			require.Equal(t, want, get(t, s, "acct", "k"), "nothing written")
		})
	}
}

// scribble changes every mutable part of r in place.
func scribble(r *journal.Record) {
	r.State = journal.StateFailed
	r.Review = "scribbled"
	r.Header.Set("Content-Type", "scribbled")
	r.Header["X-Extra"] = []string{"x"}
	for i := range r.Body {
		r.Body[i] = 'X'
	}
	for i := range r.Attempts {
		r.Attempts[i].Status = 999
	}
	r.Attempts = append(r.Attempts, journal.Attempt{Number: 99})
	if r.Result != nil {
		r.Result.ResourceID = "scribbled"
		if len(r.Result.Body) > 0 {
			r.Result.Body[0] = 'X'
		}
	}
	if r.Resolved != nil {
		r.Resolved.By = "scribbled"
	}
	r.NextDue = r.NextDue.Add(1000 * time.Hour)
}

func testDeepCopy(t *testing.T, s idem.Store) {
	ctx := context.Background()
	in := NewRecord("acct", "k", t0)
	in.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: t0}}
	in.Result = &journal.Result{StatusCode: 202, Body: []byte("accepted")}
	got := create(t, s, in)
	want := NewRecord("acct", "k", t0)
	want.Attempts = slices.Clone(in.Attempts)
	want.Result = &journal.Result{StatusCode: 202, Body: []byte("accepted")}

	scribble(in)
	require.Equal(t, want, get(t, s, "acct", "k"), "after changing Create's argument")
	scribble(got)
	require.Equal(t, want, get(t, s, "acct", "k"), "after changing Create's result")
	g := get(t, s, "acct", "k")
	scribble(g)
	require.Equal(t, want, get(t, s, "acct", "k"), "after changing Get's result")

	var inFn *journal.Record
	up, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error {
		inFn = r
		r.Review = "look"
		return nil
	})
	require.NoError(t, err)
	want.Review = "look"
	scribble(inFn)
	require.Equal(t, want, get(t, s, "acct", "k"), "after changing the record fn saw")
	scribble(up)
	require.Equal(t, want, get(t, s, "acct", "k"), "after changing Update's result")

	list, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	scribble(list[0])
	due, err := s.Due(ctx, t0, 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	scribble(due[0])
	require.NoError(t, s.ForEachOpen(ctx, func(r *journal.Record) error {
		scribble(r)
		return nil
	}))
	require.Equal(t, want, get(t, s, "acct", "k"), "after changing List, Due and ForEachOpen results")

	res, err := s.Resolve(ctx, "acct", "k", journal.Manual{State: journal.StateFailed, Reason: "r", At: t0})
	require.NoError(t, err)
	want2 := get(t, s, "acct", "k")
	scribble(res)
	require.Equal(t, want2, get(t, s, "acct", "k"), "after changing Resolve's result")
}

// checkIndex asserts that ForEachOpen and Due see exactly the open records
// of a full List, in NextDue order.
func checkIndex(t testing.TB, s idem.Store) {
	t.Helper()
	ctx := context.Background()
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	var open []*journal.Record
	for _, r := range all {
		if !r.State.Terminal() {
			open = append(open, r)
		}
	}
	var walked []*journal.Record
	require.NoError(t, s.ForEachOpen(ctx, func(r *journal.Record) error {
		walked = append(walked, r)
		return nil
	}))
	require.ElementsMatch(t, keys(open), keys(walked), "ForEachOpen() visits exactly the open records")
	require.True(t, slices.IsSortedFunc(walked, func(a, b *journal.Record) int { return a.NextDue.Compare(b.NextDue) }),
		"ForEachOpen() in NextDue order")
	for _, r := range walked {
		require.False(t, r.State.Terminal(), "ForEachOpen() visited %s/%s in state %s", r.Scope, r.Key, r.State)
	}

	// Due at the latest NextDue returns them all, in the same order.
	by := t0
	for _, r := range open {
		if r.NextDue.After(by) {
			by = r.NextDue
		}
	}
	due, err := s.Due(ctx, by, 0)
	require.NoError(t, err)
	require.Equal(t, keys(walked), keys(due), "Due(latest) equals ForEachOpen()")
	// Due at each record's NextDue returns exactly the records not later.
	for _, r := range open {
		due, err := s.Due(ctx, r.NextDue, 0)
		require.NoError(t, err)
		n := 0
		for _, o := range open {
			if !o.NextDue.After(r.NextDue) {
				n++
			}
		}
		require.Len(t, due, n, "Due(%v)", r.NextDue)
		for _, d := range due {
			require.False(t, d.NextDue.After(r.NextDue), "Due(%v) returned %s due %v", r.NextDue, d.Key, d.NextDue)
		}
	}
}

func testOpenIndex(t *testing.T, s idem.Store) {
	ctx := context.Background()
	// NextDue out of key order, including duplicates and the zero time.
	dues := []time.Duration{5, 3, 9, 3, 0, 7, 1, 8, 2, 6, 4, 9}
	for i, d := range dues {
		due := t0.Add(d * time.Minute)
		if i == 4 {
			due = time.Time{} // never scheduled: due at once
		}
		create(t, s, NewRecord("acct", fmt.Sprintf("k%02d", i), due))
	}
	// A record created terminal never enters the open index.
	done := NewRecord("acct", "created-done", t0)
	done.State, done.Settled = journal.StateSucceeded, t0
	create(t, s, done)
	checkIndex(t, s)

	settle(t, s, "acct", "k01", t0.Add(time.Minute))
	_, err := s.Update(ctx, "acct", "k02", func(r *journal.Record) error {
		r.State = journal.StateUnknown
		r.NextDue = t0.Add(-time.Hour) // rescheduled earlier
		return nil
	})
	require.NoError(t, err)
	_, err = s.Update(ctx, "acct", "k03", func(r *journal.Record) error {
		r.State = journal.StateFailed
		r.Settled = t0
		return nil
	})
	require.NoError(t, err)
	_, err = s.Resolve(ctx, "acct", "k05", journal.Manual{State: journal.StateSucceeded, Reason: "r", At: t0})
	require.NoError(t, err)
	checkIndex(t, s)

	due, err := s.Due(ctx, t0.Add(-time.Hour), 0)
	require.NoError(t, err)
	require.Equal(t, []string{"acct/k04", "acct/k02"}, keys(due), "Due() in NextDue order, zero time first")
}

func testDueLimit(t *testing.T, s idem.Store) {
	for i := range 10 {
		create(t, s, NewRecord("acct", fmt.Sprintf("k%d", i), t0.Add(time.Duration(9-i)*time.Second)))
	}
	due, err := s.Due(context.Background(), t0.Add(time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, []string{"acct/k9", "acct/k8", "acct/k7"}, keys(due), "Due(limit 3)")
	due, err = s.Due(context.Background(), t0.Add(5*time.Second), 100)
	require.NoError(t, err)
	require.Len(t, due, 6, "Due(by) with a large limit")
}

func testForEachOpenUpdates(t *testing.T, s idem.Store) {
	ctx := context.Background()
	const n = 600 // more than one page of any sensible page size
	for i := range n {
		create(t, s, NewRecord("acct", fmt.Sprintf("k%04d", i), t0.Add(time.Duration(i)*time.Second)))
	}
	visits := map[string]int{}
	err := s.ForEachOpen(ctx, func(r *journal.Record) error {
		visits[r.Key]++
		settleIt := len(visits)%3 == 0
		// Reschedule into the part not yet walked, settle some: fn runs
		// outside any transaction and may write.
		_, err := s.Update(ctx, r.Scope, r.Key, func(u *journal.Record) error {
			if settleIt {
				u.State, u.Settled = journal.StateSucceeded, t0
			} else {
				u.NextDue = u.NextDue.Add(time.Duration(n/2) * time.Second)
			}
			return nil
		})
		return err
	})
	require.NoError(t, err)
	require.Len(t, visits, n, "ForEachOpen() visited every open record")
	for k, v := range visits {
		require.Equal(t, 1, v, "ForEachOpen() visits of %s", k)
	}
	checkIndex(t, s)
}

func testForEachOpenStops(t *testing.T, s idem.Store) {
	for i := range 5 {
		create(t, s, NewRecord("acct", fmt.Sprintf("k%d", i), t0.Add(time.Duration(i)*time.Second)))
	}
	stop := errors.New("stop")
	calls := 0
	err := s.ForEachOpen(context.Background(), func(*journal.Record) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 2, calls, "fn calls after an error")
}

func testList(t *testing.T, s idem.Store) {
	ctx := context.Background()
	// Created times decrease with the key, to tell key order from time order.
	for i := range 8 {
		r := NewRecord("acct", fmt.Sprintf("k%d", i), t0)
		r.Created = t0.Add(time.Duration(8-i) * time.Minute)
		create(t, s, r)
	}
	create(t, s, NewRecord("a-first", "k", t0))
	settle(t, s, "acct", "k1", t0)
	settle(t, s, "acct", "k2", t0)
	for _, k := range []string{"k3", "k4"} {
		_, err := s.Update(ctx, "acct", k, func(r *journal.Record) error {
			r.State, r.Review = journal.StateUnknown, "key expired"
			return nil
		})
		require.NoError(t, err)
	}
	_, err := s.Update(ctx, "acct", "k5", func(r *journal.Record) error {
		r.State = journal.StateProcessing
		return nil
	})
	require.NoError(t, err)

	tests := []struct {
		name string
		f    journal.Filter
		want []string
	}{
		{"all", journal.Filter{}, []string{"a-first/k", "acct/k0", "acct/k1", "acct/k2", "acct/k3", "acct/k4", "acct/k5", "acct/k6", "acct/k7"}},
		{"succeeded", journal.Filter{States: []journal.State{journal.StateSucceeded}}, []string{"acct/k1", "acct/k2"}},
		{"unknown or processing", journal.Filter{States: []journal.State{journal.StateProcessing, journal.StateUnknown}}, []string{"acct/k3", "acct/k4", "acct/k5"}},
		{"pending", journal.Filter{States: []journal.State{journal.StatePending}}, []string{"a-first/k", "acct/k0", "acct/k6", "acct/k7"}},
		{"review", journal.Filter{Review: true}, []string{"acct/k3", "acct/k4"}},
		{"review and processing", journal.Filter{Review: true, States: []journal.State{journal.StateProcessing}}, nil},
		{"created before", journal.Filter{CreatedBefore: t0.Add(3 * time.Minute)}, []string{"a-first/k", "acct/k6", "acct/k7"}},
		{"scope", journal.Filter{Scope: "a-first"}, []string{"a-first/k"}},
		{"scope, not a prefix of another", journal.Filter{Scope: "acc"}, nil},
		{"open", journal.Filter{Open: true}, []string{"a-first/k", "acct/k0", "acct/k3", "acct/k4", "acct/k5", "acct/k6", "acct/k7"}},
		{"open and review in a scope", journal.Filter{Open: true, Review: true, Scope: "acct"}, []string{"acct/k3", "acct/k4"}},
		{"limit", journal.Filter{Limit: 2}, []string{"a-first/k", "acct/k0"}},
		{"pending limit", journal.Filter{States: []journal.State{journal.StatePending}, Limit: 3}, []string{"a-first/k", "acct/k0", "acct/k6"}},
		{"failed", journal.Filter{States: []journal.State{journal.StateFailed}}, nil},
		// After is the admin handler's page cursor: the last (scope, key)
		// of the previous page, which a prune may have deleted since.
		{"after", journal.Filter{After: journal.Position{Scope: "acct", Key: "k4"}}, []string{"acct/k5", "acct/k6", "acct/k7"}},
		{"after a key not stored", journal.Filter{After: journal.Position{Scope: "acct", Key: "k4x"}}, []string{"acct/k5", "acct/k6", "acct/k7"}},
		{"after the last", journal.Filter{After: journal.Position{Scope: "acct", Key: "k7"}}, nil},
		{"after a scope, key empty", journal.Filter{After: journal.Position{Scope: "a-first"}}, []string{"a-first/k", "acct/k0", "acct/k1", "acct/k2", "acct/k3", "acct/k4", "acct/k5", "acct/k6", "acct/k7"}},
		{"after a prefix of a scope", journal.Filter{After: journal.Position{Scope: "acc", Key: "zz"}}, []string{"acct/k0", "acct/k1", "acct/k2", "acct/k3", "acct/k4", "acct/k5", "acct/k6", "acct/k7"}},
		{"after, limit", journal.Filter{After: journal.Position{Scope: "a-first", Key: "k"}, Limit: 2}, []string{"acct/k0", "acct/k1"}},
		{"after, in a scope", journal.Filter{Scope: "acct", After: journal.Position{Scope: "acct", Key: "k5"}}, []string{"acct/k6", "acct/k7"}},
		{"after, before a scope", journal.Filter{Scope: "acct", After: journal.Position{Scope: "a-first", Key: "z"}, Limit: 1}, []string{"acct/k0"}},
		{"after, past a scope", journal.Filter{Scope: "a-first", After: journal.Position{Scope: "acct", Key: "k0"}}, nil},
		{"after, open", journal.Filter{Open: true, After: journal.Position{Scope: "acct", Key: "k3"}}, []string{"acct/k4", "acct/k5", "acct/k6", "acct/k7"}},
		{"after, review", journal.Filter{Review: true, After: journal.Position{Scope: "acct", Key: "k3"}}, []string{"acct/k4"}},
		{"after, pending limit", journal.Filter{States: []journal.State{journal.StatePending}, After: journal.Position{Scope: "acct", Key: "k0"}, Limit: 1}, []string{"acct/k6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.List(ctx, tt.f)
			require.NoError(t, err)
			require.Equal(t, tt.want, nilIfEmpty(keys(got)), "List(%+v)", tt.f)
		})
	}
	// No record holds a NUL byte, and with one the key index's byte
	// order and (Scope, Key) order part.
	for _, after := range []journal.Position{{Scope: "acct\x00k", Key: "k1"}, {Scope: "acct", Key: "k1\x00"}} {
		_, err := s.List(ctx, journal.Filter{After: after})
		require.ErrorIs(t, err, journal.ErrInvalid, "List(After: %q)", after)
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func testPrune(t *testing.T, s idem.Store) {
	ctx := context.Background()
	old := t0.Add(-30 * 24 * time.Hour)
	// Open records with ancient times everywhere: never pruned.
	for _, st := range []journal.State{journal.StatePending, journal.StateProcessing, journal.StateUnknown} {
		r := NewRecord("acct", "open-"+string(st), old)
		r.State, r.Created, r.Updated = st, old, old
		r.Settled = old // meaningless on an open record; must not matter
		create(t, s, r)
	}
	for i := range 10 {
		create(t, s, NewRecord("acct", fmt.Sprintf("done%d", i), old))
		settle(t, s, "acct", fmt.Sprintf("done%d", i), t0.Add(time.Duration(i)*time.Hour))
	}

	n, err := s.Prune(ctx, t0)
	require.NoError(t, err)
	require.Zero(t, n, "Prune() before the first settlement")
	n, err = s.Prune(ctx, t0.Add(4*time.Hour)) // strictly before: done0..done3
	require.NoError(t, err)
	require.Equal(t, 4, n, "Prune()")
	for i := range 10 {
		_, err := s.Get(ctx, "acct", fmt.Sprintf("done%d", i))
		if i < 4 {
			require.ErrorIs(t, err, journal.ErrNotFound, "pruned done%d", i)
		} else {
			require.NoError(t, err, "kept done%d", i)
		}
	}
	n, err = s.Prune(ctx, t0.Add(1000*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 6, n, "Prune() of the rest")
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"acct/open-pending", "acct/open-processing", "acct/open-unknown"}, keys(all), "open records survive Prune()")
	checkIndex(t, s)
}

// testPruneByLatestTime: Prune judges a settled record by the latest time
// it journals up to its settlement (Record.RetainFrom), not by Settled
// alone: one settled after the clock was stepped back (Settled days
// before its own sends) or sent while the clock ran fast (a time still in
// the future) is kept until that time is as old as the cut-off, and then
// pruned like any other. Pruned early, a request resubmitted with its key
// would be journaled afresh and sent again.
func testPruneByLatestTime(t *testing.T, s idem.Store) {
	ctx := context.Background()
	day := 24 * time.Hour
	settled := func(key string, settled time.Time, sent ...time.Time) {
		t.Helper()
		r := NewRecord("s", key, t0.Add(-9*day))
		r.Created, r.Updated = t0.Add(-9*day), t0.Add(-9*day)
		create(t, s, r)
		_, err := s.Update(ctx, "s", key, func(r *journal.Record) error {
			for i, at := range sent {
				r.Attempts = append(r.Attempts, journal.Attempt{Number: i + 1, Kind: journal.AttemptSubmit, Start: at, Done: true, Status: 201})
				if i == 0 {
					r.FirstSent = at
				}
			}
			r.State, r.Settled, r.Updated = journal.StateSucceeded, settled, settled
			return nil
		})
		require.NoError(t, err)
	}
	prune := func(before time.Time) int {
		t.Helper()
		n, err := s.Prune(ctx, before)
		require.NoError(t, err)
		return n
	}
	settled("old", t0.Add(-9*day), t0.Add(-9*day))
	settled("stepped-back", t0.Add(-8*day), t0.Add(-9*day), t0) // retried at t0, settled with the clock 8 days behind
	settled("ran-fast", t0.Add(-8*day), t0.Add(30*day))         // sent with the clock 30 days ahead
	settled("never-sent", t0.Add(-8*day))                       // failed before any send: only Created and Settled
	require.Equal(t, 2, prune(t0.Add(-time.Hour)), "old and never-sent")
	for _, key := range []string{"stepped-back", "ran-fast"} {
		_, err := s.Get(ctx, "s", key)
		require.NoError(t, err, "Get(%s) after Prune()", key)
	}
	require.Equal(t, 1, prune(t0.Add(time.Second)), "stepped-back, once its last send is as old")
	require.Zero(t, prune(t0.Add(30*day)), "ran-fast, before its send")
	require.Equal(t, 1, prune(t0.Add(30*day+time.Second)), "ran-fast, once its send is as old")
	all, err := s.List(ctx, journal.Filter{})
	require.NoError(t, err)
	require.Empty(t, all)
}

func testConcurrentWriters(t *testing.T, s idem.Store) {
	ctx := context.Background()
	const writers, each = 32, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("w%02d-%02d", w, i)
				if _, err := s.Create(ctx, NewRecord("acct", key, t0.Add(time.Duration(i)*time.Second))); err != nil {
					errs <- err
					continue
				}
				_, err := s.Update(ctx, "acct", key, func(r *journal.Record) error {
					if i%2 == 0 {
						r.State, r.Settled = journal.StateSucceeded, t0
					} else {
						r.State = journal.StateProcessing
					}
					r.Attempts = append(r.Attempts, journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: t0})
					return nil
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	// Two writers of one record from many goroutines: every update applies.
	create(t, s, NewRecord("acct", "shared", t0))
	for range writers {
		wg.Go(func() {
			_, err := s.Update(ctx, "acct", "shared", func(r *journal.Record) error {
				r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1})
				return nil
			})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for w := range writers {
		for i := range each {
			r := get(t, s, "acct", fmt.Sprintf("w%02d-%02d", w, i))
			require.Len(t, r.Attempts, 1)
			require.Equal(t, i%2 == 0, r.State == journal.StateSucceeded, "state of %s", r.Key)
		}
	}
	shared := get(t, s, "acct", "shared")
	require.Len(t, shared.Attempts, writers, "concurrent updates of one record")
	for i, a := range shared.Attempts {
		require.Equal(t, i+1, a.Number, "each update saw the one before")
	}
	checkIndex(t, s)
}

func testCancelledContext(t *testing.T, s idem.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Create(ctx, NewRecord("acct", "k", t0))
	require.ErrorIs(t, err, context.Canceled, "Create() with a cancelled context")
	_, err = s.Get(context.Background(), "acct", "k")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing written by a cancelled Create")
	create(t, s, NewRecord("acct", "k", t0))
	_, err = s.Update(ctx, "acct", "k", func(r *journal.Record) error {
		t.Error("fn called with a cancelled context")
		return nil
	})
	require.ErrorIs(t, err, context.Canceled, "Update() with a cancelled context")
}

func testClosed(t *testing.T, s idem.Store) {
	ctx := context.Background()
	create(t, s, NewRecord("acct", "k", t0))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "second Close()")

	_, err := s.Create(ctx, NewRecord("acct", "k2", t0))
	require.ErrorIs(t, err, journal.ErrClosed, "Create()")
	_, err = s.Get(ctx, "acct", "k")
	require.ErrorIs(t, err, journal.ErrClosed, "Get()")
	_, err = s.Update(ctx, "acct", "k", func(*journal.Record) error { return nil })
	require.ErrorIs(t, err, journal.ErrClosed, "Update()")
	_, err = s.Resolve(ctx, "acct", "k", journal.Manual{State: journal.StateFailed, Reason: "r", At: t0})
	require.ErrorIs(t, err, journal.ErrClosed, "Resolve()")
	err = s.ForEachOpen(ctx, func(*journal.Record) error { return nil })
	require.ErrorIs(t, err, journal.ErrClosed, "ForEachOpen()")
	_, err = s.Due(ctx, t0, 0)
	require.ErrorIs(t, err, journal.ErrClosed, "Due()")
	_, err = s.List(ctx, journal.Filter{})
	require.ErrorIs(t, err, journal.ErrClosed, "List()")
	_, err = s.Prune(ctx, t0)
	require.ErrorIs(t, err, journal.ErrClosed, "Prune()")
}

// Lease tests use times around t0, as the client's clock gives them.
func claim(t testing.TB, s idem.Store, key, owner string, now time.Time, d time.Duration) journal.Lease {
	t.Helper()
	_, l, err := s.Claim(context.Background(), "acct", key, owner, now, now.Add(d))
	require.NoError(t, err, "Claim(%s) by %s", key, owner)
	require.Equal(t, owner, l.Owner, "lease owner")
	require.Equal(t, key, l.Key, "lease key")
	require.True(t, l.Expires.Equal(now.Add(d)), "lease expiry %v; want %v", l.Expires, now.Add(d))
	return l
}

// leasedUpdate writes under l: one more attempt.
func leasedUpdate(s idem.Store, l journal.Lease, called *bool) (*journal.Record, error) {
	return s.Update(journal.WithLease(context.Background(), l), l.Scope, l.Key, func(r *journal.Record) error {
		if called != nil {
			*called = true
		}
		r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: t0})
		return nil
	})
}

func testLeaseClaim(t *testing.T, s idem.Store) {
	ctx := context.Background()
	want := create(t, s, NewRecord("acct", "k", t0))
	rec, l1, err := s.Claim(ctx, "acct", "k", "a", t0, t0.Add(time.Minute))
	require.NoError(t, err, "Claim() of a free record")
	require.Equal(t, want, rec, "Claim() returns the record")
	require.NotZero(t, l1.Token, "token")

	// Another owner meets a live lease: told who holds it until when.
	rec, held, err := s.Claim(ctx, "acct", "k", "b", t0.Add(59*time.Second), t0.Add(2*time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() of a live lease by another owner")
	require.Equal(t, want, rec, "Claim() refused returns the record")
	require.Equal(t, "a", held.Owner, "holder's owner")
	require.True(t, held.Expires.Equal(t0.Add(time.Minute)), "holder's expiry %v", held.Expires)

	// Its own owner claims it anew (a restart under the same name).
	l2 := claim(t, s, "k", "a", t0.Add(time.Second), time.Minute)
	require.Greater(t, l2.Token, l1.Token, "token of a second claim")
	_, err = leasedUpdate(s, l1, nil)
	require.ErrorIs(t, err, journal.ErrLeaseLost, "write under the first claim after the second")

	_, _, err = s.Claim(ctx, "acct", "missing", "a", t0, t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrNotFound, "Claim() of a missing record")
}

func testLeaseFencing(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	la := claim(t, s, "k", "a", t0, time.Minute)
	got, err := leasedUpdate(s, la, nil)
	require.NoError(t, err, "write under the current lease")
	require.Len(t, got.Attempts, 1)

	// a's lease expires; b takes over and writes.
	lb := claim(t, s, "k", "b", t0.Add(time.Minute), time.Minute)
	require.Greater(t, lb.Token, la.Token, "token of the takeover")
	_, err = leasedUpdate(s, lb, nil)
	require.NoError(t, err, "write under the takeover's lease")
	want := get(t, s, "acct", "k")

	// a wakes up: every write it makes is refused, its function not called.
	called := false
	_, err = leasedUpdate(s, la, &called)
	require.ErrorIs(t, err, journal.ErrLeaseLost, "stale Update()")
	require.False(t, called, "fn called for a stale lease")
	_, err = s.Resolve(journal.WithLease(context.Background(), la), "acct", "k",
		journal.Manual{State: journal.StateFailed, Reason: "stale", At: t0})
	require.ErrorIs(t, err, journal.ErrLeaseLost, "stale Resolve()")
	_, err = s.Renew(context.Background(), la, t0.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrLeaseLost, "stale Renew()")
	require.ErrorIs(t, s.Release(context.Background(), la), journal.ErrLeaseLost, "stale Release()")
	require.Equal(t, want, get(t, s, "acct", "k"), "record after the stale writes")

	// A write without a lease (an operator's) is not fenced.
	_, err = s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		r.Review = "looked at"
		return nil
	})
	require.NoError(t, err, "Update() without a lease")
	// b still holds the lease.
	_, err = leasedUpdate(s, lb, nil)
	require.NoError(t, err, "write under the current lease after an unleased write")
}

func testLeaseTakeover(t *testing.T, s idem.Store) {
	ctx := context.Background()
	create(t, s, NewRecord("acct", "k", t0))
	la := claim(t, s, "k", "a", t0, time.Minute)
	// Live until its expiry, exclusive.
	_, _, err := s.Claim(ctx, "acct", "k", "b", t0.Add(time.Minute-time.Nanosecond), t0.Add(2*time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() just before the expiry")
	lb := claim(t, s, "k", "b", t0.Add(time.Minute), time.Minute)
	require.Greater(t, lb.Token, la.Token)
	// Now a meets b's live lease.
	_, held, err := s.Claim(ctx, "acct", "k", "a", t0.Add(90*time.Second), t0.Add(3*time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "the old owner claims back a live takeover")
	require.Equal(t, "b", held.Owner)
}

func testLeaseRenewRelease(t *testing.T, s idem.Store) {
	ctx := context.Background()
	create(t, s, NewRecord("acct", "k", t0))
	la := claim(t, s, "k", "a", t0, time.Minute)
	renewed, err := s.Renew(ctx, la, t0.Add(5*time.Minute))
	require.NoError(t, err, "Renew()")
	require.Equal(t, la.Token, renewed.Token, "Renew() keeps the token")
	require.True(t, renewed.Expires.Equal(t0.Add(5*time.Minute)), "renewed expiry %v", renewed.Expires)
	// Past the first expiry, the renewal holds the record.
	_, _, err = s.Claim(ctx, "acct", "k", "b", t0.Add(2*time.Minute), t0.Add(3*time.Minute))
	require.ErrorIs(t, err, journal.ErrLeased, "Claim() of a renewed lease")
	_, err = leasedUpdate(s, renewed, nil)
	require.NoError(t, err, "write under the renewed lease")

	require.NoError(t, s.Release(ctx, renewed), "Release()")
	// Free at once, and the next claim's token is greater still.
	lb := claim(t, s, "k", "b", t0.Add(2*time.Minute), time.Minute)
	require.Greater(t, lb.Token, renewed.Token, "token after a release")
	_, err = leasedUpdate(s, renewed, nil)
	require.ErrorIs(t, err, journal.ErrLeaseLost, "write under a released lease")
}

func testLeaseTerminal(t *testing.T, s idem.Store) {
	ctx := context.Background()
	create(t, s, NewRecord("acct", "k", t0))
	l := claim(t, s, "k", "a", t0, time.Minute)
	done, err := s.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
		r.State, r.Settled = journal.StateSucceeded, t0
		return nil
	})
	require.NoError(t, err, "settling Update() under the lease")
	rec, _, err := s.Claim(ctx, "acct", "k", "b", t0, t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrTerminal, "Claim() of a terminal record")
	require.Equal(t, done, rec, "Claim() of a terminal record returns it")
}

func testLeaseInvalid(t *testing.T, s idem.Store) {
	ctx := context.Background()
	create(t, s, NewRecord("acct", "k", t0))
	create(t, s, NewRecord("acct", "other", t0))
	_, _, err := s.Claim(ctx, "acct", "k", "", t0, t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrInvalid, "Claim() without an owner")
	_, _, err = s.Claim(ctx, "acct", "a\x00b", "a", t0, t0.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrInvalid, "Claim() of a key with a NUL byte")
	_, err = s.ClaimDue(ctx, "", t0, t0.Add(time.Minute), 0)
	require.ErrorIs(t, err, journal.ErrInvalid, "ClaimDue() without an owner")
	// A lease of one record does not let a write of another through.
	l := claim(t, s, "k", "a", t0, time.Minute)
	called := false
	_, err = s.Update(journal.WithLease(ctx, l), "acct", "other", func(*journal.Record) error {
		called = true
		return nil
	})
	require.ErrorIs(t, err, journal.ErrInvalid, "Update() of another record under a lease")
	require.False(t, called, "fn called")
	_, err = leasedUpdate(s, journal.Lease{Scope: "acct", Key: "k", Owner: "a"}, nil)
	require.Error(t, err, "Update() under a lease without a token")
}

func testClaimDue(t *testing.T, s idem.Store) {
	ctx := context.Background()
	for i := range 6 {
		create(t, s, NewRecord("acct", fmt.Sprintf("k%d", i), t0.Add(time.Duration(i)*time.Second)))
	}
	done := NewRecord("acct", "done", t0)
	done.State, done.Settled = journal.StateSucceeded, t0
	create(t, s, done)
	// b drives k1 right now; k0's lease of c expired.
	claim(t, s, "k1", "b", t0, time.Hour)
	lc := claim(t, s, "k0", "c", t0.Add(-time.Hour), time.Minute)

	now := t0.Add(4 * time.Second)
	got, err := s.ClaimDue(ctx, "a", now, now.Add(time.Minute), 3)
	require.NoError(t, err)
	var names []string
	for _, c := range got {
		names = append(names, c.Record.Key)
		require.Equal(t, c.Record.Key, c.Lease.Key, "lease of %s", c.Record.Key)
		require.Equal(t, "a", c.Lease.Owner)
		require.True(t, c.Lease.Expires.Equal(now.Add(time.Minute)), "expiry of %s", c.Record.Key)
		require.Equal(t, get(t, s, "acct", c.Record.Key), c.Record, "record of %s", c.Record.Key)
	}
	require.Equal(t, []string{"k0", "k2", "k3"}, names, "ClaimDue(limit 3) skips the live lease, takes the expired one")
	require.Greater(t, got[0].Lease.Token, lc.Token, "token of the takeover by ClaimDue")

	// The claimed are a's now: nobody's ClaimDue gets them, not even a's
	// own (a drive of a's is under way).
	again, err := s.ClaimDue(ctx, "a", now, now.Add(time.Minute), 0)
	require.NoError(t, err)
	require.Len(t, again, 1, "ClaimDue() again by a: only what it had not claimed")
	require.Equal(t, "k4", again[0].Record.Key)
	got, err = s.ClaimDue(ctx, "d", now, now.Add(time.Minute), 0)
	require.NoError(t, err)
	require.Empty(t, got, "ClaimDue() by another owner while every due record is leased")
	_, err = leasedUpdate(s, lc, nil)
	require.ErrorIs(t, err, journal.ErrLeaseLost, "write under the lease ClaimDue took over")
}

func testClaimDueConcurrent(t *testing.T, s idem.Store) {
	ctx := context.Background()
	const n, owners = 60, 6
	for i := range n {
		create(t, s, NewRecord("acct", fmt.Sprintf("k%02d", i), t0))
	}
	var mu sync.Mutex
	claimedBy := map[string][]string{}
	var wg sync.WaitGroup
	errs := make(chan error, owners*n)
	for o := range owners {
		owner := fmt.Sprintf("owner%d", o)
		wg.Go(func() {
			for range n { // bounded: each round claims at least one or ends
				got, err := s.ClaimDue(ctx, owner, t0, t0.Add(time.Minute), 4)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					claimedBy[c.Record.Key] = append(claimedBy[c.Record.Key], owner)
				}
				mu.Unlock()
				// Drive each: a visit reschedules what it does not settle,
				// and its lease keeps the others off meanwhile.
				for _, c := range got {
					_, err := s.Update(journal.WithLease(ctx, c.Lease), c.Record.Scope, c.Record.Key, func(r *journal.Record) error {
						r.NextDue = t0.Add(time.Hour)
						return nil
					})
					if err != nil {
						errs <- err
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, claimedBy, n, "every due record claimed")
	for k, by := range claimedBy {
		require.Len(t, by, 1, "owners of %s", k)
	}
}
