package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal/journaltest"
)

// TestScansWithNonstandardStrings: a database set with
// standard_conforming_strings = off (PostgreSQL's runtime setting, still
// found on databases a legacy application shares; ALTER DATABASE … SET
// standard_conforming_strings = off) reads a backslash in a plain string
// literal as an escape. The scans' filter on records written by a newer
// idem spelled the magic bytes '\xe1de': there it is the byte 0xE1 and
// "de", which a UTF-8 database refuses, and Due, ClaimDue and Stats
// failed on every call, stopping Run, where they worked before the filter.
func TestScansWithNonstandardStrings(t *testing.T) {
	ctx := context.Background()
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		pc.ConnConfig.RuntimeParams["standard_conforming_strings"] = "off"
	})
	recs := journaltest.NewerRecords()[:3]
	for _, r := range recs {
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	setNewer(t, s, "s", recs[1].Key)
	late := recs[2].NextDue.Add(1)

	due, err := s.Due(ctx, late, 0)
	require.NoError(t, err)
	require.Len(t, due, 2)
	require.Equal(t, []string{recs[0].Key, recs[2].Key}, []string{due[0].Key, due[1].Key})

	claimed, err := s.ClaimDue(ctx, "me", late, late.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	require.Equal(t, []string{recs[0].Key, recs[2].Key}, []string{claimed[0].Record.Key, claimed[1].Record.Key})

	st, err := s.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Newer)
	require.Equal(t, 2, st.Open)
	require.Equal(t, 3, st.Total)
}
