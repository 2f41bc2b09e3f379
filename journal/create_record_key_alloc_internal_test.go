package journal

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/owned"
)

// TestCreateKeysItsOverlayEntryWithTheOpsBytes: a create's overlay entry
// is keyed by the string of the op's own record key (opKey), not a
// conversion of it, which was an allocation on every operation a Client
// journals (issue 14): an owned Create allocates 3 times (4 before). The
// key shared must still be the record's: every record created, a short
// key's (in the op's room) and a long one's (a slice of its own), is
// found by Get and by an Update, before and after the applier has copied
// it into the file, and the overlay's entry says its own record key.
func TestCreateKeysItsOverlayEntryWithTheOpsBytes(t *testing.T) {
	ctx := context.Background()
	s := ownedTestStore(t)
	const runs = 200
	recs := make([]*Record, runs+1) // AllocsPerRun's warm-up run too
	for i := range recs {
		recs[i] = ownedTestRecord(fmt.Sprint("a", i))
		owned.Mark(recs[i])
	}
	var i int
	allocs := testing.AllocsPerRun(runs, func() {
		if _, err := s.Create(ctx, recs[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if !raceEnabled {
		require.LessOrEqual(t, allocs, 3.0, "allocations per owned Create")
	}

	keys := []string{"short", strings.Repeat("long", 40)} // 160 bytes: past rkRoom
	for _, key := range keys {
		_, err := s.Create(ctx, ownedTestRecord(key))
		require.NoError(t, err)
		e := s.ov.get(recordKey("s", key))
		require.NotNil(t, e, "%.8s: the overlay's entry", key)
		require.Equal(t, string(recordKey("s", key)), e.rk, "%.8s: the entry's record key", key)
	}
	for j := range recs {
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
	for j := range recs {
		_, err := s.Get(ctx, "s", fmt.Sprint("a", j))
		require.NoError(t, err, "a%d, in the file", j)
	}
}
