package admin_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// storeWithoutAfter is an idem.Store written before journal.Filter.After:
// it lists from the first record whatever the bound, as every Store did
// while the handler dropped what came before its cursor itself. The field
// is new, and such a Store still compiles.
type storeWithoutAfter struct{ *recordingStore }

func (s storeWithoutAfter) List(ctx context.Context, f journal.Filter) ([]*journal.Record, error) {
	f.After = journal.Position{}
	return s.recordingStore.List(ctx, f)
}

// TestListPagesWithAStoreWithoutAfter: with a Store that ignores
// Filter.After, every page after the first was the first page again, with
// the same next: a client following next (idem -url list) never ended.
// The handler drops what its Store returns up to the cursor and, when the
// Store did not start after it, lists without a limit, as it did before.
func TestListPagesWithAStoreWithoutAfter(t *testing.T) {
	f := listFixtureOver(t, 10, func(s *recordingStore) idem.Store { return storeWithoutAfter{s} })
	keys := f.listAll(3, 5)
	require.Equal(t, []string{"order-00", "order-01", "order-02", "order-03", "order-04", "order-05", "order-06",
		"order-07", "order-08", "order-09"}, keys)
}
