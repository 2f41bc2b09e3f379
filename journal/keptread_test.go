package journal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestCreateReadsTheFileAsWritten: a Create whose key the overlay lacks
// looks in the file through the transaction the committer keeps between
// rounds; that transaction must never show the file as it was before the
// applier copied a record into it (and dropped it from the overlay), or
// before Prune deleted one.
func TestCreateReadsTheFileAsWritten(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	create := func(key string) error {
		_, err := s.Create(ctx, journaltest.NewRecord("acct", key, t0))
		return err
	}

	require.NoError(t, create("first"), "Create(first)") // the committer now keeps a read of the file
	require.NoError(t, create("applied"), "Create(applied)")
	require.NoError(t, s.Checkpoint(ctx), "Checkpoint()") // "applied" is in the file only
	require.ErrorIs(t, create("applied"), journal.ErrExists, "Create(applied) again, once applied")

	_, err := s.Update(ctx, "acct", "applied", func(r *journal.Record) error {
		r.State, r.Settled = journal.StateSucceeded, t0
		return nil
	})
	require.NoError(t, err, "Update(applied)")
	require.NoError(t, s.Checkpoint(ctx), "Checkpoint()")
	require.ErrorIs(t, create("applied"), journal.ErrExists, "Create(applied) again, settled")
	n, err := s.Prune(ctx, t0.Add(time.Second))
	require.NoError(t, err, "Prune()")
	require.Equal(t, 1, n, "Prune() deleted")
	require.NoError(t, create("applied"), "Create(applied) again, once pruned")
}

// TestCreateOnDamagedFileFailsClosed: a Create whose key lies on a damaged
// page of the file reads it through the committer's kept transaction,
// which must report the damage (ErrCorrupt) like any other read, rather
// than crash the process or report the key absent (a second record for
// an operation already sent), and must not stay stuck on the damage: the
// next Create begins afresh, and Close does not wait for the transaction.
func TestCreateOnDamagedFileFailsClosed(t *testing.T) {
	for name, damage := range pageDamages() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := settledJournal(t, 3000)
			damageDonePage(t, path, damage)
			s, err := journal.Open(path)
			require.NoError(t, err)
			for i := range 2 {
				err := failsClosed(func() error {
					_, err := s.Create(ctx, journaltest.NewRecord("acct", "k00001", t0))
					return err
				})
				require.ErrorIs(t, err, journal.ErrCorrupt, "Create() %d of a key on the damaged page", i+1)
			}
			require.NoError(t, s.Close(), "Close()")
		})
	}
}
