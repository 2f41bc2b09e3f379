package pgjournal_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// TestReopenKeepsKeyPlacement: where the key went (header name and form,
// or the body) is kept in the row, so that a Client of another service
// or release sharing the schema, or this one after a restart, finds it
// and sends the operation under no other key. A record without one
// (journaled before placements were) reads back without one.
func TestReopenKeepsKeyPlacement(t *testing.T) {
	ctx := context.Background()
	schema := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	s, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
	require.NoError(t, err)
	t.Cleanup(func() {
		admin, err := pgjournal.Open(context.Background(), dsn(t))
		if err == nil {
			_ = admin.DropSchema(context.Background(), schema)
			_ = admin.Close()
		}
	})
	require.NoError(t, s.Migrate(ctx))
	placed := journaltest.NewRecord("acct", "k-placed", t0)
	placed.KeyPlacement = "header Paypal-Request-Id"
	_, err = s.Create(ctx, placed)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k-older", t0))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(schema))
	require.NoError(t, err)
	defer s.Close()
	got, err := s.Get(ctx, "acct", "k-placed")
	require.NoError(t, err)
	require.Equal(t, "header Paypal-Request-Id", got.KeyPlacement)
	got, err = s.Get(ctx, "acct", "k-older")
	require.NoError(t, err)
	require.Empty(t, got.KeyPlacement)
	var open []*journal.Record
	require.NoError(t, s.ForEachOpen(ctx, func(r *journal.Record) error {
		open = append(open, r)
		return nil
	}))
	require.Len(t, open, 2)
}
