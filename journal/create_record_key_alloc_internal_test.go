package journal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

// TestCreateKeysItsOverlayEntryWithTheOpsBytes: a create's overlay entry
// is keyed by the string of the op's own record key (opKey), not a
// conversion of it, which was an allocation on every operation a Client
// journals (issue 14): an owned Create allocates twice (3 with the
// conversion; TestAdoptedRecordIsTheClients counts the copy adopt no
// longer makes). The key shared must still be the record's: every record
// created, a short key's (in the op's room) and a long one's (a slice of
// its own), is found by Get and by an Update, before and after the
// applier has copied it into the file, and the overlay's entry says its
// own record key.
func TestCreateKeysItsOverlayEntryWithTheOpsBytes(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	created := ownedCreates(t, s, "a", 0)
	keys := []string{"short", strings.Repeat("long", 40)} // 160 bytes: past rkRoom
	for _, key := range keys {
		_, err := s.Create(ctx, ownedTestRecord(key))
		require.NoError(t, err)
		e := s.ov.get(recordKey("s", key))
		require.NotNil(t, e, "%.8s: the overlay's entry", key)
		require.Equal(t, string(recordKey("s", key)), e.rk, "%.8s: the entry's record key", key)
	}
	for j := range created {
		got, err := s.Get(ctx, "s", fmt.Sprint("a", j))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("a", j), got.Key)
	}
	for _, key := range keys {
		_, err := s.Update(ctx, "s", key, func(r *Record) error { r.Review = "x"; return nil })
		require.NoError(t, err, "%.8s: an update of the record created", key)
	}
	require.NoError(t, s.Checkpoint(ctx))
	for _, key := range keys {
		got, err := s.Get(ctx, "s", key)
		require.NoError(t, err)
		require.Equal(t, key, got.Key)
		require.Equal(t, "x", got.Review, "%.8s: the update's write, in the file", key)
	}
	for j := range created {
		_, err := s.Get(ctx, "s", fmt.Sprint("a", j))
		require.NoError(t, err, "a%d, in the file", j)
	}
}

// ownedCreates creates 200 client-owned records of n attempts each, keys
// prefix and a number, and asserts that each Create allocates at most
// twice and hands back the client's record itself. It returns how many it
// created (AllocsPerRun's warm-up run's too): keys prefix0 on.
func ownedCreates(t *testing.T, s *Store, prefix string, n int) int {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	const runs = 200
	recs := make([]*Record, runs+1) // AllocsPerRun's warm-up run too
	for i := range recs {
		recs[i] = ownedTestRecord(fmt.Sprint(prefix, i))
		for j := range n {
			recs[i].Attempts = append(recs[i].Attempts, Attempt{Number: j + 1, Kind: AttemptSubmit, Start: start})
		}
		owned.Mark(recs[i])
	}
	var i int
	allocs := testing.AllocsPerRun(runs, func() {
		stored, err := s.Create(ctx, recs[i])
		if err != nil || stored != recs[i] {
			t.Fatalf("create %d: %v, the client's record handed back: %v", i, err, stored == recs[i])
		}
		i++
	})
	if !raceEnabled {
		require.LessOrEqual(t, allocs, 2.0, "allocations per owned Create")
	}
	return len(recs)
}
