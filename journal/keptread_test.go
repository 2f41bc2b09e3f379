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
