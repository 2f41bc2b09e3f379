package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWriteOpsHoldTheirOverlayEntry: a Create's and an Update's staged
// write (the overlay's entry, which lives until the applier has copied
// the record into the file) is carried in the op's own allocation, not
// one of its own: an Update allocates 7 times (8 before). Each entry
// says of its record what newLogged said (its encoding, open, due and
// settled times), each write's entry is its own, not a later write's,
// and the file reads back the last.
func TestWriteOpsHoldTheirOverlayEntry(t *testing.T) {
	s := ownedTestStore(t)
	ctx := context.Background()
	_, err := s.Create(ctx, blockRecord("k"))
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Update(ctx, "s", "k", func(r *Record) error { r.Review = "x"; return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled {
		require.LessOrEqual(t, allocs, 7.0, "allocations per Update")
	}

	due := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var entries []*logged
	for i := range 4 {
		key := fmt.Sprint("w", i)
		created, err := s.Create(ctx, blockRecord(key))
		require.NoError(t, err)
		e := s.ov.get(recordKey("s", key))
		require.NotNil(t, e, "create %s's entry", key)
		require.Equal(t, *newLogged(e.rk, created, encode(nil, created)), logged{rk: e.rk, enc: e.enc, open: e.open, nextDue: e.nextDue, settled: e.settled}, "create %s's entry", key)
		entries = append(entries, e)
		updated, err := s.Update(ctx, "s", key, func(r *Record) error {
			r.NextDue = due.Add(time.Duration(i) * time.Minute)
			if i%2 == 1 {
				r.State, r.Settled = StateSucceeded, due
			}
			return nil
		})
		require.NoError(t, err)
		u := s.ov.get(recordKey("s", key))
		require.NotSame(t, e, u, "update %s's entry", key)
		require.Equal(t, *newLogged(u.rk, updated, encode(nil, updated)), logged{rk: u.rk, enc: u.enc, open: u.open, nextDue: u.nextDue, settled: u.settled}, "update %s's entry", key)
		require.Equal(t, i%2 == 0, u.open)
		entries = append(entries, u)
	}
	for i, e := range entries {
		r, err := decode(e.enc)
		require.NoError(t, err, "entry %d", i)
		require.Equal(t, i%2 == 0 || i%4 == 1, r.State == StatePending, "entry %d's record: the write's own", i)
	}
	require.NoError(t, s.Checkpoint(ctx))
	for i := range 4 {
		got, err := s.Get(ctx, "s", fmt.Sprint("w", i))
		require.NoError(t, err)
		require.Equal(t, due.Add(time.Duration(i)*time.Minute), got.NextDue)
	}
}
