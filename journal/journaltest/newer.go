package journaltest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// NewerKey is the key, in scope "s", of the record of NewerRecords that a
// test of a Store makes one written by a newer idem before it calls
// NewerOpenRecord.
const NewerKey = "k0001"

// NewerRecords returns the open records NewerOpenRecord expects the Store
// to hold: more than a page of a scan of open records (256), soonest due
// first by key, NewerKey second.
func NewerRecords() []*journal.Record {
	recs := make([]*journal.Record, 256+2)
	for i := range recs {
		recs[i] = NewRecord("s", fmt.Sprintf("k%04d", i), t0.Add(time.Duration(i)*time.Second))
	}
	return recs
}

// NewerOpenRecord checks what a Store does with an open record written by
// a newer idem, as a rollback leaves it (its record version byte, the
// third of journal.EncodeRecord's, above journal.RecordVersion). Due,
// ForEachOpen and ClaimDue failed on it with journal.ErrVersion, which
// stopped Client.Run on its first pass and Resume at start-up, and no
// other open operation was settled again. s holds NewerRecords, NewerKey
// made newer; logged returns what the Store's logger has logged.
//
// The scans skip it, without it taking a place in their limit (a due
// record behind it would wait for good) and without it ending a paged
// scan early; the logger names it once, by its key; Stats counts it in
// Newer and Total only; a call naming its key still fails with
// journal.ErrVersion, writing nothing: a second record under its key
// would be a second order once the newer idem settles the first.
func NewerOpenRecord(t *testing.T, s idem.Store, logged func() string) {
	ctx := context.Background()
	n := len(NewerRecords())
	keysOf := func(recs []*journal.Record) []string {
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.Key
		}
		return out
	}
	for range 2 {
		due, err := s.Due(ctx, t0.Add(time.Hour), 3)
		require.NoError(t, err)
		require.Equal(t, []string{"k0000", "k0002", "k0003"}, keysOf(due), "the limit's worth of readable records")

		var visited []string
		require.NoError(t, s.ForEachOpen(ctx, func(r *journal.Record) error {
			visited = append(visited, r.Key)
			return nil
		}))
		require.Len(t, visited, n-1, "every readable open record, past the first page")
		require.NotContains(t, visited, NewerKey)

		claimed, err := s.ClaimDue(ctx, "me", t0.Add(time.Hour), t0.Add(2*time.Hour), 2)
		require.NoError(t, err)
		require.Equal(t, []string{"k0000", "k0002"}, keysOf(claimedRecords(claimed)))
		for _, c := range claimed {
			require.NoError(t, s.Release(ctx, c.Lease))
		}
	}
	require.Equal(t, 1, strings.Count(logged(), "level=WARN"), "said once: %s", logged())
	require.Contains(t, logged(), "key="+NewerKey)

	if ss, ok := s.(idem.StatsStore); ok {
		st, err := ss.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st.Newer)
		require.Equal(t, n-1, st.Open)
		require.Equal(t, n, st.Total)
		require.Equal(t, map[journal.State]int{journal.StatePending: n - 1}, st.ByState)
	}

	_, err := s.Get(ctx, "s", NewerKey)
	require.ErrorIs(t, err, journal.ErrVersion)
	_, err = s.Create(ctx, NewRecord("s", NewerKey, t0))
	require.ErrorIs(t, err, journal.ErrVersion)
	_, err = s.Update(ctx, "s", NewerKey, func(r *journal.Record) error { r.State = journal.StateFailed; return nil })
	require.ErrorIs(t, err, journal.ErrVersion)
	_, _, err = s.Claim(ctx, "s", NewerKey, "me", t0, t0.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrVersion)
}

func claimedRecords(cs []journal.Claimed) []*journal.Record {
	out := make([]*journal.Record, len(cs))
	for i, c := range cs {
		out[i] = c.Record
	}
	return out
}
