package journal

// The Store's rules for what a write may change, and the index invariant,
// under unusual records and times.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// TestUpdateCannotChangeMethod checks that Update keeps the Method
// (promise 2: same request on every attempt; the conformance suite checks
// Scope, Key, URL and Body, not Method).
func TestUpdateCannotChangeMethod(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	want, err := s.Create(ctx, rvRecord("x", rvT0))
	require.NoError(t, err)
	_, err = s.Update(ctx, "s", "x", func(r *Record) error {
		r.Method = http.MethodPut
		return nil
	})
	require.ErrorIs(t, err, ErrInvalid)
	got, err := s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestRoundTripThroughStore checks that what a write returns is what
// a later Get returns, field for field, for a record using every corner of
// the encoding: multi-valued and empty headers, attempts of every kind,
// a Result with no body, a Resolution, local times with monotonic
// readings, and times far outside the index's range.
func TestRoundTripThroughStore(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	now := time.Now() // carries a monotonic reading
	rec := rvRecord("x", time.Date(1500, 1, 1, 0, 0, 0, 7, zone))
	rec.Header = http.Header{
		"Accept":    {"application/json", "text/plain"},
		"X-Empty":   {},
		"X-Blank":   {""},
		"x-lower":   {"as given"},
		"X-Lower":   {"canonical"},
		"X-Unicode": {"é✓"},
	}
	rec.Attempts = []Attempt{
		{Number: 1, Kind: AttemptSubmit, Start: now, Wrote: true, Done: true, Status: 503, Err: "e", RetryAfter: -time.Second, Duration: math.MaxInt64},
		{Number: 2, Kind: AttemptQuery, Start: now.In(zone)},
		{Number: -3, Kind: "custom", Start: time.Unix(math.MaxInt64, 999999999)},
		{},
	}
	rec.Result = &Result{StatusCode: 202}
	rec.Resolved = &Resolution{By: "op", Reason: "r", At: time.Unix(math.MinInt64/2, 1)}
	rec.Created = now
	rec.FirstSent = time.Date(9999, 12, 31, 23, 59, 59, 999999999, zone)
	rec.Updated = now.In(zone)

	created, err := s.Create(ctx, rec)
	require.NoError(t, err)
	got, err := s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Equal(t, created, got, "Create() result equals Get()")
	require.Equal(t, []string{"application/json", "text/plain"}, got.Header["Accept"])
	require.Len(t, got.Header, len(rec.Header))
	require.Len(t, got.Attempts, 4)
	for i := range rec.Attempts {
		require.True(t, rec.Attempts[i].Start.Equal(got.Attempts[i].Start), "attempt %d start", i)
	}
	require.True(t, got.NextDue.Equal(rec.NextDue) && got.FirstSent.Equal(rec.FirstSent) && got.Created.Equal(rec.Created))
	require.Equal(t, "custom", string(got.Attempts[2].Kind))
	require.Nil(t, got.Result.Body)

	updated, err := s.Update(ctx, "s", "x", func(r *Record) error {
		r.Attempts = append(r.Attempts, Attempt{Number: 5, Start: now})
		r.NextDue = time.Time{}
		return nil
	})
	require.NoError(t, err)
	got, err = s.Get(ctx, "s", "x")
	require.NoError(t, err)
	require.Equal(t, updated, got, "Update() result equals Get()")
}

// TestExtremeTimesKeepIndexesConsistent checks the index invariant
// (a record is in the open index iff it is not terminal, under the key of
// its NextDue, or in the settled index under its Settled) through every
// kind of write, with times that timeKey clamps: the zero time, years
// before 1678 and after 2262, and the ends of time.Unix's range.
func TestExtremeTimesKeepIndexesConsistent(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	times := []time.Time{
		{},
		time.Unix(math.MinInt64, 0),
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 999999999),
		rvT0,
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(math.MaxInt64, 999999999),
	}
	requireCheck := func(what string) {
		t.Helper()
		require.NoError(t, s.viewChecked(), what)
	}
	for i, due := range times {
		_, err := s.Create(ctx, rvRecord(fmt.Sprint(i), due))
		require.NoError(t, err)
	}
	requireCheck("after Create")
	// The zero time and the clamped early times are due by the zero time.
	due, err := s.Due(ctx, time.Time{}, 0)
	require.NoError(t, err)
	require.Len(t, due, 3, "Due(zero time)")
	due, err = s.Due(ctx, time.Unix(math.MaxInt64, 999999999), 0)
	require.NoError(t, err)
	require.Len(t, due, len(times), "Due(end of time) returns every open record")

	for i := range times {
		j := len(times) - 1 - i
		_, err := s.Update(ctx, "s", fmt.Sprint(i), func(r *Record) error {
			r.NextDue = times[j]
			return nil
		})
		require.NoError(t, err)
	}
	requireCheck("after rescheduling")
	for i := range times {
		if i%2 == 0 {
			_, err := s.Update(ctx, "s", fmt.Sprint(i), func(r *Record) error {
				r.State, r.Settled = StateFailed, times[len(times)-1-i]
				if r.Settled.IsZero() {
					r.Settled = time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)
				}
				return nil
			})
			require.NoError(t, err)
		}
	}
	requireCheck("after settling")
	for i := range times {
		_, err := s.Resolve(ctx, "s", fmt.Sprint(i), Manual{State: StateSucceeded, Reason: "r", At: times[(i+3)%len(times)].Add(time.Nanosecond)})
		if times[(i+3)%len(times)].Add(time.Nanosecond).IsZero() {
			require.ErrorIs(t, err, ErrInvalid)
			continue
		}
		require.NoError(t, err)
	}
	requireCheck("after Resolve")
	n, err := s.Prune(ctx, time.Unix(math.MaxInt64, 999999999))
	require.NoError(t, err)
	require.Positive(t, n)
	requireCheck("after Prune")
	list, err := s.List(ctx, Filter{})
	require.NoError(t, err)
	for _, r := range list {
		require.True(t, r.Open() || timeKey(r.Settled) >= timeKey(time.Unix(math.MaxInt64, 999999999)),
			"%s settled %v not pruned", r.Key, r.Settled)
	}
}

// TestPruneSkipsOpenRecordsUnderAnyTimes checks promise 11: Prune
// never deletes an open record, whatever its times (here an ancient, even
// meaningless, Settled on open records and a cut-off at the end of time);
// it deletes the terminal one.
func TestPruneSkipsOpenRecordsUnderAnyTimes(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	for i, st := range []State{StatePending, StateProcessing, StateUnknown} {
		r := rvRecord(fmt.Sprint("open", i), time.Time{})
		r.State, r.Settled, r.Created, r.Updated = st, time.Unix(0, 0), time.Unix(0, 0), time.Unix(0, 0)
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	done := rvRecord("done", rvT0)
	done.State, done.Settled = StateSucceeded, time.Unix(0, 0)
	_, err := s.Create(ctx, done)
	require.NoError(t, err)
	n, err := s.Prune(ctx, time.Unix(math.MaxInt64, 0))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	open, err := s.List(ctx, Filter{})
	require.NoError(t, err)
	require.Len(t, open, 3)
}

// TestForEachOpenVisitsRecordRescheduledLater: ForEachOpen "calls fn
// for every open record"; its only stated exceptions are records created,
// or moved to an earlier NextDue, during the walk. A record not yet
// visited that a concurrent writer (the reconciler, a foreground call)
// moves to a *later* NextDue, past the index's last entry when the walk
// began, is never visited: the walk stops at that entry (end).
func TestForEachOpenVisitsRecordRescheduledLater(t *testing.T) {
	s, _ := rvOpen(t)
	ctx := context.Background()
	const n = openPage + 44
	for i := range n {
		_, err := s.Create(ctx, rvRecord(fmt.Sprintf("k%04d", i), rvT0.Add(time.Duration(i)*time.Second)))
		require.NoError(t, err)
	}
	last := fmt.Sprintf("k%04d", n-1)
	visited := map[string]bool{}
	err := s.ForEachOpen(ctx, func(r *Record) error {
		if len(visited) == 0 {
			// Another writer reschedules a record the walk has not reached.
			_, err := s.Update(ctx, "s", last, func(u *Record) error {
				u.NextDue = rvT0.Add(24 * time.Hour)
				return nil
			})
			require.NoError(t, err)
		}
		visited[r.Key] = true
		return nil
	})
	require.NoError(t, err)
	require.True(t, visited[last], "open record %s, moved later during the walk, never visited", last)
	require.Len(t, visited, n)
}

// TestCreateOversizedKeyIsInvalid: Create's record "must satisfy the
// journal's rules (see ErrInvalid)", and ErrInvalid means "breaks the
// journal's rules; nothing was written". A (scope, key) too long for
// bbolt's 32 KiB key limit passes validate, reaches the transaction and
// fails there with bbolt's bare "key too large", which the caller cannot
// tell from an I/O failure (and which, for a key of 32761 to 32768 bytes,
// fails after half the write: records.Put succeeded, the index Put did
// not).
func TestCreateOversizedKeyIsInvalid(t *testing.T) {
	s, _ := rvOpen(t)
	hugeKey := strings.Repeat("k", bolt.MaxKeySize+100)
	_, err := s.Create(context.Background(), rvRecord(hugeKey, rvT0))
	require.ErrorIs(t, err, ErrInvalid, "Create() with a key bbolt cannot store")
}
