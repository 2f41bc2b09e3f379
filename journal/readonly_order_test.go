package journal

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadOnlyDueTieOrder: among records due at the same time (every
// record with a zero NextDue, for one), a read-only Store's merge of log
// and file orders as the file will once the log is applied: by sequence
// number, which an update keeps, and new records after, in the order
// they were written. With a limit, Due and ForEachOpen then answer the
// same records.
func TestReadOnlyDueTieOrder(t *testing.T) {
	ctx := context.Background()
	path := crashedJournal(t, func(s *Store) {
		for _, k := range []string{"old", "new"} {
			_, err := s.Create(ctx, rvRecord(k, rvT0))
			require.NoError(t, err)
		}
		require.NoError(t, s.applyAll())
		// Same NextDue: only the review changes, in the log.
		_, err := s.Update(ctx, "s", "old", func(r *Record) error { r.Review = "look"; return nil })
		require.NoError(t, err)
	})
	read := func(s *Store) (due, all []string) {
		d, err := s.Due(ctx, rvT0, 1)
		require.NoError(t, err)
		var open []*Record
		require.NoError(t, s.ForEachOpen(ctx, func(r *Record) error { open = append(open, r); return nil }))
		return recordKeys(d), recordKeys(open)
	}
	ro, err := Open(path, ReadOnly())
	require.NoError(t, err)
	roDue, roAll := read(ro)
	require.NoError(t, ro.Close())

	rw, err := Open(path)
	require.NoError(t, err)
	rwDue, rwAll := read(rw)
	require.NoError(t, rw.Close())

	require.Equal(t, rwAll, roAll, "ForEachOpen order, read-only vs applied")
	require.Equal(t, rwDue, roDue, "Due(limit 1), read-only vs applied")
}

// TestReadOnlyListAfter: a read-only Store (the operator tool's, beside a
// running service) lists from its file and merges the writes still in the
// log; Filter.After bounds both, so a page answers what it will once the
// log is applied, new records before the bound and updated ones after it
// included.
func TestReadOnlyListAfter(t *testing.T) {
	ctx := context.Background()
	path := crashedJournal(t, func(s *Store) {
		for _, k := range []string{"a", "b", "c", "d"} {
			_, err := s.Create(ctx, rvRecord(k, rvT0))
			require.NoError(t, err)
		}
		require.NoError(t, s.applyAll())
		// In the log only: one new record on each side of the bound, and
		// an update on each side.
		for _, k := range []string{"aa", "bb"} {
			_, err := s.Create(ctx, rvRecord(k, rvT0))
			require.NoError(t, err)
		}
		for _, k := range []string{"a", "c"} {
			_, err := s.Update(ctx, "s", k, func(r *Record) error { r.Review = "look"; return nil })
			require.NoError(t, err)
		}
	})
	list := func(s *Store, f Filter) []string {
		recs, err := s.List(ctx, f)
		require.NoError(t, err)
		return recordKeys(recs)
	}
	after := Position{Scope: "s", Key: "b"}
	filters := []Filter{{After: after}, {After: after, Limit: 2}, {After: after, Review: true}, {After: after, Open: true, Limit: 1}}

	ro, err := Open(path, ReadOnly())
	require.NoError(t, err)
	var roLists [][]string
	for _, f := range filters {
		roLists = append(roLists, list(ro, f))
	}
	require.NoError(t, ro.Close())
	require.Equal(t, []string{"bb", "c", "d"}, roLists[0], "read-only List(After s/b)")

	rw, err := Open(path)
	require.NoError(t, err)
	defer rw.Close()
	for i, f := range filters {
		require.Equal(t, list(rw, f), roLists[i], "List(%+v), read-only vs applied", f)
	}
}

// recordKeys returns the keys of rs, in order.
func recordKeys(rs []*Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}
