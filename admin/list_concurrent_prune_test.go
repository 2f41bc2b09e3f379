package admin_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// pruningStore prunes once, right after the first List returns, as Run's
// hourly prune (Client.Prune) on another goroutine can between the
// handler's List and its reads of each operation.
type pruningStore struct {
	*journal.Store
	cutoff time.Time
	pruned int
	done   bool
}

func (s *pruningStore) List(ctx context.Context, f journal.Filter) ([]*journal.Record, error) {
	recs, err := s.Store.List(ctx, f)
	if err == nil && !s.done {
		s.done = true
		s.pruned, err = s.Store.Prune(ctx, s.cutoff)
	}
	return recs, err
}

// TestListPageSurvivesAConcurrentPrune: a page whose List found more
// operations than the page holds, one of which was pruned before the
// handler read it, came back full but without a next cursor, as if it were
// the last: idem -url list stopped there, and every operation after it
// (unknown ones included) was missing from what the operator saw.
func TestListPageSurvivesAConcurrentPrune(t *testing.T) {
	clock := idemtest.NewClock(epoch)
	srv, js := serverAndJournal(t, clock)
	store := &pruningStore{Store: js, cutoff: epoch.Add(30 * time.Minute)}
	client, err := idem.New(store, idem.WithHTTPClient(srv.Client()), idem.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	ctx := context.Background()
	submit := func(key string) {
		t.Helper()
		res, err := client.Submit(ctx, idem.Request{Key: key, URL: srv.URL + "/orders", Body: []byte(`{}`)})
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
	}
	submit("b") // settled an hour before the others: past the prune's cut-off
	clock.Advance(time.Hour)
	for _, k := range []string{"a", "c", "d", "e"} {
		submit(k)
	}

	h := httptest.NewServer(admin.NewHandler(client, admin.WithClock(clock)))
	t.Cleanup(h.Close)
	f := &fixture{t: t, admin: h}
	keys := f.listAll(3, 5)
	require.Equal(t, 1, store.pruned, "operations pruned between List and the reads")
	require.Equal(t, []string{"a", "c", "d", "e"}, keys, "every operation left is listed")
}
