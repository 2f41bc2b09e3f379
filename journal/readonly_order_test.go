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
	keys := func(rs []*Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Key)
		}
		return out
	}
	read := func(s *Store) (due, all []string) {
		d, err := s.Due(ctx, rvT0, 1)
		require.NoError(t, err)
		var open []*Record
		require.NoError(t, s.ForEachOpen(ctx, func(r *Record) error { open = append(open, r); return nil }))
		return keys(d), keys(open)
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
