package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestReadCallTimeoutMessages: a read the Store's bound (WithCallTimeout)
// ends on a database that stopped answering says so, as a write's error
// does: it names WithCallTimeout, says that the read changed nothing, and
// what to do (call again once the database answers, or raise the bound
// if the database is only slow), not pgx's "timeout: context deadline
// exceeded" alone.
func TestReadCallTimeoutMessages(t *testing.T) {
	const bound = time.Second
	p := newStallProxy(t)
	store := openStoreVia(t, p, nil, pgjournal.WithCallTimeout(bound))
	mustCreate(t, store, "k")
	forever := context.Background()
	now := time.Now()
	reads := []struct {
		name string
		call func() error
	}{
		{"Get()", func() error { _, err := store.Get(forever, "acct", "k"); return err }},
		{"List()", func() error { _, err := store.List(forever, journal.Filter{Scope: "acct"}); return err }},
		{"Due()", func() error { _, err := store.Due(forever, now, 10); return err }},
		{"Stats()", func() error { _, err := store.Stats(forever); return err }},
		{"ForEachOpen()", func() error {
			return store.ForEachOpen(forever, func(*journal.Record) error { return nil })
		}},
	}
	for _, tc := range reads {
		p.stall(false)
		err := returnsWithin(t, p, 5*bound, tc.name, tc.call)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s on a stalled database", tc.name)
		for _, want := range []string{"WithCallTimeout", "changed nothing", "call again once the database answers"} {
			require.ErrorContains(t, err, want, "%s on a stalled database", tc.name)
		}
		p.resume()
		require.NoError(t, returnsWithin(t, p, 5*bound, tc.name+" again", tc.call), "%s once the database answers", tc.name)
	}
}
