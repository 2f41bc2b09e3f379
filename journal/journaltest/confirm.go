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

// confirmTests are the suite's tests of Store.Confirm.
var confirmTests = []struct {
	name string
	fn   func(*testing.T, idem.Store)
}{
	{"ConfirmSettles", testConfirmSettles},
	{"ConfirmKeepsMadeTwice", testConfirmKeepsMadeTwice},
	{"ConfirmConflictKeepsMadeTwice", testConfirmConflictKeepsMadeTwice},
	{"ConfirmKeyIgnoredResentKeepsMaybeTwice", testConfirmKeyIgnoredResentKeepsMaybeTwice},
	{"ConfirmUnlessFlaggedKeyIgnored", testConfirmUnlessFlaggedKeyIgnored},
	{"ConfirmBoundKeepsDispute", testConfirmBoundKeepsDispute},
	{"ConfirmDuplicate", testConfirmDuplicate},
	{"ConfirmAgrees", testConfirmAgrees},
	{"ConfirmConflict", testConfirmConflict},
	{"ConfirmConflictNotPruned", testConfirmConflictNotPruned},
	{"ConfirmNotFound", testConfirmNotFound},
	{"ConfirmInvalid", testConfirmInvalid},
	{"ConfirmKeptByUpdate", testConfirmKeptByUpdate},
	{"ConfirmConcurrent", testConfirmConcurrent},
}

func confirmation(st journal.State, id, event string, at time.Time) journal.Confirmation {
	return journal.Confirmation{State: st, ResourceID: id, Source: "webhook", EventID: event, Reason: "charge." + string(st), At: at}
}

// flagged makes an open record unknown and flagged for review, as a client
// does when the key window passed.
func flagged(t testing.TB, s idem.Store, key string) {
	t.Helper()
	_, err := s.Update(context.Background(), "acct", key, func(r *journal.Record) error {
		r.State = journal.StateUnknown
		r.Review = "key expired"
		r.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Wrote: true, Done: true, Err: "timeout"}}
		return nil
	})
	require.NoError(t, err)
}

func testConfirmSettles(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	flagged(t, s, "k")
	at := t0.Add(25 * time.Hour)
	got, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "ch_1", "evt_1", at))
	require.NoError(t, err, "Confirm() of a flagged record")
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Empty(t, got.Review, "Review cleared")
	require.Equal(t, at, got.Settled, "Settled")
	require.Equal(t, "ch_1", got.Result.ResourceID)
	require.Len(t, got.Confirmations, 1)
	require.Equal(t, journal.ConfirmSettled, got.Confirmations[0].Effect)
	require.Equal(t, "evt_1", got.Confirmations[0].EventID)
	require.Equal(t, got, get(t, s, "acct", "k"), "Get() after Confirm")

	due, err := s.Due(context.Background(), t0.Add(1000*time.Hour), 0)
	require.NoError(t, err)
	require.Empty(t, due, "Due() after the record was confirmed")
	open, err := s.List(context.Background(), journal.Filter{Open: true})
	require.NoError(t, err)
	require.Empty(t, open, "List(Open) after the record was confirmed")
	n, err := s.Prune(context.Background(), at.Add(time.Nanosecond))
	require.NoError(t, err)
	require.Equal(t, 1, n, "Prune() finds the confirmed record by its Settled time")
}

// madeTwice creates an open record whose server made a second resource
// for a resend of the key it had said it holds ord_1 for, flagged so.
func madeTwice(t testing.TB, s idem.Store, key string) {
	t.Helper()
	create(t, s, NewRecord("acct", key, t0))
	_, err := s.Update(context.Background(), "acct", key, func(r *journal.Record) error {
		r.State = journal.StateProcessing
		r.Result = &journal.Result{ResourceID: "ord_1", StatusCode: 202}
		r.Review = journal.ReviewMadeTwice
		r.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Wrote: true, Done: true, Status: 202}}
		return nil
	})
	require.NoError(t, err)
}

// A record the server made a second resource for (ReviewMadeTwice) keeps
// the flag when an event for the first settles it: the second still needs
// a person, and the settled record is not pruned until Resolve.
func testConfirmKeepsMadeTwice(t *testing.T, s idem.Store) {
	madeTwice(t, s, "k")
	at := t0.Add(time.Hour)
	got, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "ord_1", "evt_1", at))
	require.NoError(t, err, "Confirm() of the first resource")
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Equal(t, journal.ReviewMadeTwice, got.Review, "Review kept")
	require.Equal(t, journal.ConfirmSettled, got.Confirmations[0].Effect)
	require.Equal(t, got, get(t, s, "acct", "k"), "Get() after Confirm")
	n, err := s.Prune(context.Background(), at.Add(1000*time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "Prune() of a flagged record")
}

// An open record flagged ReviewMadeTwice keeps the flag when an event
// about the other resource contradicts it: the flag is what keeps it from
// being resent to a server that lost the key. Stored as decided.
func testConfirmConflictKeepsMadeTwice(t *testing.T, s idem.Store) {
	madeTwice(t, s, "k")
	got, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "ord_2", "evt_2", t0.Add(time.Hour)))
	require.ErrorIs(t, err, journal.ErrConfirmConflict, "Confirm() of the other resource")
	require.Equal(t, journal.StateProcessing, got.State)
	require.Equal(t, journal.ReviewMadeTwice, got.Review, "Review kept")
	require.Equal(t, journal.ConfirmConflicted, got.Confirmations[0].Effect)
	require.Equal(t, got, get(t, s, "acct", "k"), "Get() after Confirm")
}

// A record whose server ignores the key (ReviewKeyIgnored), its one
// attempt sent twice by net/http (Attempt.Resent: the first copy written
// whole on a connection that died), is settled by an event for one copy
// flagged ReviewMaybeTwice: the other may have charged. The flag
// survives the store, as it decides this.
func testConfirmKeyIgnoredResentKeepsMaybeTwice(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		r.State = journal.StateUnknown
		r.Review = journal.ReviewKeyIgnored
		r.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Wrote: true, Done: true, Resent: true, Status: 500}}
		return nil
	})
	require.NoError(t, err)
	require.True(t, get(t, s, "acct", "k").Attempts[0].Resent, "Attempts[0].Resent stored")
	got, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "pay_2", "evt_1", t0.Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Equal(t, journal.ReviewMaybeTwice, got.Review, "Review: the other copy may have charged")
	require.Equal(t, got, get(t, s, "acct", "k"), "Get() after Confirm")
}

// A confirmation made UnlessFlaggedKeyIgnored, by a client that read the
// record unflagged, writes nothing over a ReviewKeyIgnored flag another
// replica set since (the flag may be the endpoint's one trace, which the
// client journals first), and settles a record not so flagged as any
// confirmation does, the condition not stored.
func testConfirmUnlessFlaggedKeyIgnored(t *testing.T, s idem.Store) {
	conf := confirmation(journal.StateSucceeded, "pay_1", "evt_1", t0.Add(time.Hour))
	got := settleUnlessFlaggedKeyIgnored(t, s, func(key string, unless bool) (*journal.Record, error) {
		return s.Confirm(context.Background(), "acct", key, conf.UnlessFlaggedKeyIgnored(unless))
	})
	require.Equal(t, got.Confirmations, get(t, s, "acct", "flagged").Confirmations, "the condition is not recorded")
}

// settleUnlessFlaggedKeyIgnored journals sentOnceFlaggedAndNot's
// records in s, and settles them succeeded with settle (a confirmation
// or a resolution of key, made UnlessFlaggedKeyIgnored if unless): over
// the flag, made so, it must write nothing (journal.ErrFlaggedKeyIgnored);
// not made so, settle and clear it; and the unflagged record, made so,
// be settled as ever. It returns that record.
func settleUnlessFlaggedKeyIgnored(t *testing.T, s idem.Store, settle func(key string, unless bool) (*journal.Record, error)) *journal.Record {
	t.Helper()
	sentOnceFlaggedAndNot(t, s)
	before := get(t, s, "acct", "flagged")
	_, err := settle("flagged", true)
	require.ErrorIs(t, err, journal.ErrFlaggedKeyIgnored)
	require.Equal(t, before, get(t, s, "acct", "flagged"), "nothing written over the flag")
	got, err := settle("flagged", false)
	require.NoError(t, err, "the same settlement, once the flag was read")
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Empty(t, got.Review, "the flag cleared")

	got, err = settle("unflagged", true)
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Equal(t, got, get(t, s, "acct", "unflagged"), "Get() after the settlement")
	return got
}

// sentOnceFlaggedAndNot journals in s two operations unknown after one
// send answered 500: "flagged", flagged ReviewKeyIgnored since, and
// "unflagged".
func sentOnceFlaggedAndNot(t *testing.T, s idem.Store) {
	t.Helper()
	for _, key := range []string{"flagged", "unflagged"} {
		create(t, s, NewRecord("acct", key, t0))
		_, err := s.Update(context.Background(), "acct", key, func(r *journal.Record) error {
			r.State = journal.StateUnknown
			if key == "flagged" {
				r.Review = journal.ReviewKeyIgnored
			}
			r.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: t0, Wrote: true, Done: true, Status: 500}}
			return nil
		})
		require.NoError(t, err)
	}
}

// Past MaxConfirmations, the event that settled a record and the failure
// that disputes its success are kept: the client reads them.
func testConfirmBoundKeepsDispute(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	at := t0.Add(time.Hour)
	_, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "ch_1", "settled", at))
	require.NoError(t, err)
	_, err = s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateFailed, "ch_1", "disputed", at))
	require.ErrorIs(t, err, journal.ErrConfirmConflict)
	for i := range journal.MaxConfirmations {
		_, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateFailed, fmt.Sprintf("ch_other_%d", i), fmt.Sprintf("other_%d", i), at))
		require.ErrorIs(t, err, journal.ErrConfirmConflict)
	}
	got := get(t, s, "acct", "k")
	require.Len(t, got.Confirmations, journal.MaxConfirmations)
	require.Equal(t, "settled", got.Confirmations[0].EventID)
	require.Equal(t, "disputed", got.Confirmations[1].EventID)
	require.Equal(t, fmt.Sprintf("other_%d", journal.MaxConfirmations-1), got.Confirmations[journal.MaxConfirmations-1].EventID)
}

func testConfirmDuplicate(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	c := confirmation(journal.StateFailed, "", "evt_1", t0.Add(time.Hour))
	first, err := s.Confirm(context.Background(), "acct", "k", c)
	require.NoError(t, err)
	c.At = c.At.Add(time.Hour) // redelivered later
	got, err := s.Confirm(context.Background(), "acct", "k", c)
	require.ErrorIs(t, err, journal.ErrExists, "Confirm() of a recorded event")
	require.NotErrorIs(t, err, journal.ErrConfirmConflict)
	require.Equal(t, first, got, "Confirm() of a recorded event returns the stored record")
	require.Equal(t, first, get(t, s, "acct", "k"), "nothing written")
}

func testConfirmAgrees(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	settled := settle(t, s, "acct", "k", t0.Add(time.Second))
	for i, id := range []string{"res-k", ""} {
		got, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, id, fmt.Sprintf("evt_%d", i), t0.Add(time.Hour)))
		require.NoError(t, err, "Confirm() agreeing with the record (resource id %q)", id)
		require.Equal(t, settled.State, got.State)
		require.Equal(t, settled.Settled, got.Settled, "Settled unchanged")
		require.Equal(t, settled.Result, got.Result, "Result unchanged")
		require.Empty(t, got.Review)
		require.Len(t, got.Confirmations, i+1)
		require.Equal(t, journal.ConfirmAgreed, got.Confirmations[i].Effect)
		require.Equal(t, got, get(t, s, "acct", "k"))
	}
	n, err := s.Prune(context.Background(), t0.Add(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n, "the settled index still holds the record under its Settled time")
}

func testConfirmConflict(t *testing.T, s idem.Store) {
	tests := []struct {
		name string
		c    journal.Confirmation
	}{
		{"failed against succeeded", confirmation(journal.StateFailed, "", "evt_f", t0.Add(time.Hour))},
		{"another resource id", confirmation(journal.StateSucceeded, "res-other", "evt_o", t0.Add(time.Hour))},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			create(t, s, NewRecord("acct", key, t0))
			settled := settle(t, s, "acct", key, t0.Add(time.Second))
			got, err := s.Confirm(context.Background(), "acct", key, tt.c)
			require.ErrorIs(t, err, journal.ErrConfirmConflict, "Confirm() contradicting the record")
			require.NotNil(t, got, "the record as stored, with the conflict")
			require.Equal(t, journal.StateSucceeded, got.State, "the settled state is kept")
			require.Equal(t, settled.Result, got.Result, "the result is kept")
			require.Equal(t, settled.Settled, got.Settled)
			require.Equal(t, journal.ReviewConfirmConflict, got.Review)
			require.Len(t, got.Confirmations, 1)
			require.Equal(t, journal.ConfirmConflicted, got.Confirmations[0].Effect)
			require.Equal(t, got, get(t, s, "acct", key))

			again, err := s.Confirm(context.Background(), "acct", key, tt.c)
			require.ErrorIs(t, err, journal.ErrExists, "the same event again")
			require.ErrorIs(t, err, journal.ErrConfirmConflict, "the same event again gets the same answer")
			require.Equal(t, got, again)

			_, err = s.Update(context.Background(), "acct", key, func(r *journal.Record) error { return nil })
			require.ErrorIs(t, err, journal.ErrTerminal, "a flagged terminal record is still terminal")
			review, err := s.List(context.Background(), journal.Filter{Review: true, Scope: "acct"})
			require.NoError(t, err)
			require.Contains(t, keys(review), "acct/"+key, "List(Review) shows the conflict")

			resolved, err := s.Resolve(context.Background(), "acct", key, journal.Manual{State: journal.StateSucceeded, Reason: "checked", By: "alice", At: t0.Add(2 * time.Hour)})
			require.NoError(t, err)
			require.Empty(t, resolved.Review, "Resolve clears the conflict")
			require.Len(t, resolved.Confirmations, 1, "Resolve keeps the confirmations")
		})
	}
}

// testConfirmConflictNotPruned: a settled record flagged by a
// contradicting confirmation waits for a person (Resolve), however old:
// Prune keeps it, and prunes it a retention after it was resolved.
func testConfirmConflictNotPruned(t *testing.T, s idem.Store) {
	ctx := context.Background()
	create(t, s, NewRecord("acct", "k", t0))
	settle(t, s, "acct", "k", t0.Add(time.Second))
	_, err := s.Confirm(ctx, "acct", "k", confirmation(journal.StateFailed, "", "evt_f", t0.Add(time.Hour)))
	require.ErrorIs(t, err, journal.ErrConfirmConflict)

	n, err := s.Prune(ctx, t0.Add(1000*time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "Prune() of a record flagged for review")
	review, err := s.List(ctx, journal.Filter{Review: true, Scope: "acct"})
	require.NoError(t, err)
	require.Equal(t, []string{"acct/k"}, keys(review), "List(Review) after Prune()")

	resolvedAt := t0.Add(2000 * time.Hour)
	_, err = s.Resolve(ctx, "acct", "k", journal.Manual{State: journal.StateSucceeded, Reason: "checked", By: "alice", At: resolvedAt})
	require.NoError(t, err)
	n, err = s.Prune(ctx, resolvedAt)
	require.NoError(t, err)
	require.Zero(t, n, "Prune() before the resolution")
	n, err = s.Prune(ctx, resolvedAt.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n, "Prune() once resolved")
}

func testConfirmNotFound(t *testing.T, s idem.Store) {
	_, err := s.Confirm(context.Background(), "acct", "missing", confirmation(journal.StateSucceeded, "ch_1", "evt_1", t0))
	require.ErrorIs(t, err, journal.ErrNotFound)
	_, err = s.Get(context.Background(), "acct", "missing")
	require.ErrorIs(t, err, journal.ErrNotFound, "nothing created")
}

func testConfirmInvalid(t *testing.T, s idem.Store) {
	want := create(t, s, NewRecord("acct", "k", t0))
	ok := confirmation(journal.StateSucceeded, "ch_1", "evt_1", t0)
	tests := []struct {
		name   string
		scope  string
		mutate func(*journal.Confirmation)
	}{
		{"processing", "acct", func(c *journal.Confirmation) { c.State = journal.StateProcessing }},
		{"empty state", "acct", func(c *journal.Confirmation) { c.State = "" }},
		{"no source", "acct", func(c *journal.Confirmation) { c.Source = "" }},
		{"no event id", "acct", func(c *journal.Confirmation) { c.EventID = " " }},
		{"no time", "acct", func(c *journal.Confirmation) { c.At = time.Time{} }},
		{"empty scope", "", func(*journal.Confirmation) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			got, err := s.Confirm(context.Background(), tt.scope, "k", c)
			require.ErrorIs(t, err, journal.ErrInvalid)
			require.Nil(t, got)
			require.Equal(t, want, get(t, s, "acct", "k"), "nothing written")
		})
	}
}

func testConfirmKeptByUpdate(t *testing.T, s idem.Store) {
	create(t, s, NewRecord("acct", "k", t0))
	_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		r.State = journal.StateProcessing
		r.Result = &journal.Result{ResourceID: "ch_1", StatusCode: 202}
		return nil
	})
	require.NoError(t, err)
	flaggedRec, err := s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "ch_2", "evt_1", t0.Add(time.Hour)))
	require.ErrorIs(t, err, journal.ErrConfirmConflict, "Confirm() naming another resource than the processing one")
	require.Equal(t, journal.StateProcessing, flaggedRec.State, "still open")

	got, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
		r.NextDue = t0.Add(2 * time.Hour)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, flaggedRec.Confirmations, got.Confirmations, "Update keeps the confirmations")

	for _, fn := range []func(*journal.Record){
		func(r *journal.Record) { r.Confirmations = nil },
		func(r *journal.Record) { r.Confirmations[0].State = journal.StateFailed },
		func(r *journal.Record) { r.Confirmations = append(r.Confirmations, r.Confirmations[0]) },
	} {
		_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
			fn(r)
			return nil
		})
		require.ErrorIs(t, err, journal.ErrInvalid, "Update() changing Confirmations")
	}
	require.Equal(t, got, get(t, s, "acct", "k"), "nothing written")
}

// testConfirmConcurrent races one event delivered many times against
// writers that drive the record: exactly one delivery settles it, the
// rest are duplicates, and no Update lands after it.
func testConfirmConcurrent(t *testing.T, s idem.Store) {
	const deliveries, writers = 8, 4
	create(t, s, NewRecord("acct", "k", t0))
	var wg sync.WaitGroup
	errs := make([]error, deliveries)
	for i := range deliveries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Confirm(context.Background(), "acct", "k", confirmation(journal.StateSucceeded, "ch_1", "evt_1", t0.Add(time.Hour)))
		}()
	}
	updates := make([]int, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				_, err := s.Update(context.Background(), "acct", "k", func(r *journal.Record) error {
					r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptQuery, Start: t0, Done: true, Status: 404})
					return nil
				})
				if errors.Is(err, journal.ErrTerminal) {
					return
				}
				if err != nil {
					updates[i] = -1
					return
				}
				updates[i]++
			}
		}()
	}
	wg.Wait()
	settled, dup := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			settled++
		case errors.Is(err, journal.ErrExists):
			dup++
		default:
			t.Errorf("Confirm(): %v", err)
		}
	}
	require.Equal(t, 1, settled, "deliveries that settled")
	require.Equal(t, deliveries-1, dup, "deliveries that were duplicates")
	for i, n := range updates {
		require.GreaterOrEqual(t, n, 0, "writer %d failed other than ErrTerminal", i)
	}
	got := get(t, s, "acct", "k")
	require.Equal(t, journal.StateSucceeded, got.State)
	require.Len(t, got.Confirmations, 1)
	total := 0
	for _, n := range updates {
		total += n
	}
	require.Len(t, got.Attempts, total, "every Update committed before the confirmation, none after")
}
