package journal_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// TestReopenKeepsKeyPlacement: where the key went (header name and form,
// or the body) outlives the process that journaled it, or a Client of
// another release driving the operation after a restart would send it
// under its own settings. A record without one (journaled before
// placements were) is written in the record version an older build
// reads, and reads back without one.
func TestReopenKeepsKeyPlacement(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t)
	placed := journaltest.NewRecord("acct", "k-placed", t0)
	placed.KeyPlacement = "header Idempotency-Key quoted"
	_, err := s.Create(ctx, placed)
	require.NoError(t, err)
	_, err = s.Create(ctx, journaltest.NewRecord("acct", "k-older", t0))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s2, err := journal.Open(path)
	require.NoError(t, err, "reopen")
	defer s2.Close()
	got, err := s2.Get(ctx, "acct", "k-placed")
	require.NoError(t, err)
	require.Equal(t, "header Idempotency-Key quoted", got.KeyPlacement)
	got, err = s2.Get(ctx, "acct", "k-older")
	require.NoError(t, err)
	require.Empty(t, got.KeyPlacement)
	_, err = s2.Update(ctx, "acct", "k-placed", func(r *journal.Record) error {
		r.KeyPlacement = "body"
		return nil
	})
	require.ErrorIs(t, err, journal.ErrInvalid, "an Update moving the key")

	require.Equal(t, byte(journal.RecordVersion), journal.EncodeRecord(nil, placed)[2], "a placed record's version")
	require.Less(t, journal.EncodeRecord(nil, journaltest.NewRecord("acct", "k-older", t0))[2], byte(journal.RecordVersion),
		"a record without a placement stays readable by the release before")
}
