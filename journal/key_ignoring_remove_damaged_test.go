package journal_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// A journal holds as many endpoints ignoring the key as it keeps
// (MaxKeyIgnoringEndpoints), so a Client that learns one more cannot
// journal it (ErrKeyIgnoringFull) and its lost answers cannot be flagged;
// removing one the provider fixed is the way to make room. One page of
// its settled records is damaged (a bad disk block). RemoveKeyIgnoring
// asked Stats, before removing, whether a newer idem left open records:
// Stats reads every record, settled ones too, and failed on the damaged
// page, so every removal failed, for ever ("journal: stats: damaged page
// in bucket "done.seq"", removed false), and the new endpoint could never
// be journaled. The question is about open records only, and it is
// answered from them (NewerOpenCounter): the removal succeeds, and the new
// endpoint is journaled. Stats still fails, as it must on a damaged page.
func TestRemoveKeyIgnoringOverDamagedSettledPage(t *testing.T) {
	ctx := t.Context()
	path := settledJournal(t, 3000)
	endpointOf := func(i int) string { return fmt.Sprintf("POST https://api.example.com/v1/orders/%d", i) }
	s, err := journal.Open(path, journal.WithUnsafeNoSync())
	require.NoError(t, err)
	for i := range journal.MaxKeyIgnoringEndpoints {
		require.NoError(t, s.AddKeyIgnoring(ctx, endpointOf(i)))
	}
	require.NoError(t, s.Close())
	damageDonePage(t, path, pageDamages()["wrong page id"])

	s, err = journal.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	_, err = s.Stats(ctx)
	require.ErrorIs(t, err, journal.ErrCorrupt, "Stats() over the damaged settled page")
	learnt := endpointOf(journal.MaxKeyIgnoringEndpoints)
	require.ErrorIs(t, s.AddKeyIgnoring(ctx, learnt), journal.ErrKeyIgnoringFull)

	removed, flagged, err := idem.RemoveKeyIgnoring(ctx, s, endpointOf(0))
	require.NoError(t, err, "RemoveKeyIgnoring() over a damaged settled page")
	require.True(t, removed, "RemoveKeyIgnoring(): removed")
	require.Zero(t, flagged, "RemoveKeyIgnoring(): flagged (nothing was sent)")
	require.NoError(t, s.AddKeyIgnoring(ctx, learnt), "AddKeyIgnoring() in the room the removal made")
	kept, err := s.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Len(t, kept, journal.MaxKeyIgnoringEndpoints)
	require.NotContains(t, kept, endpointOf(0))
	require.Contains(t, kept, learnt)
}
