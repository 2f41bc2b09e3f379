package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// TestSyncStandbyStatementTimeout: with synchronous replication (what the
// package asks for before a failover) and a standby that stops
// confirming, a write's COMMIT waits for it, committed locally but not
// yet replicated, until the Store's bound ends the call: it says it may
// have committed (journal.ErrMaybeCommitted), and the client reports the
// outcome unknown and sends nothing, since a failover could lose the
// record. A statement_timeout on the role or database does not end that
// wait as a cancel would (PostgreSQL would then report the commit made,
// with a warning that it may not be replicated): PostgreSQL disarms it
// before the commit.
func TestSyncStandbyStatementTimeout(t *testing.T) {
	ctx := context.Background()
	pg := startPrivateServer(t)
	const bound = 3 * time.Second
	store, err := pgjournal.Open(ctx, pg.DSN+"&statement_timeout=300", pgjournal.WithCallTimeout(bound))
	require.NoError(t, err)
	defer store.Close()
	require.NoError(t, store.Migrate(ctx))
	mustCreate(t, store, "k")
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	c := newClient(t, store, srv)

	// A synchronous standby that never confirms (none is connected).
	admin, err := pgx.Connect(ctx, pg.DSN)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = 'ghost'`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var names string
		err := admin.QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&names)
		return err == nil && names == "ghost"
	}, 10*time.Second, 10*time.Millisecond, "synchronous_standby_names set")

	_, err = store.Update(ctx, "acct", "k", func(r *journal.Record) error {
		r.Review = "unconfirmed"
		return nil
	})
	t.Logf("Update(): %v", err)
	require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Update() whose COMMIT no standby confirmed")

	_, err = c.Submit(ctx, order(srv, "sent"))
	t.Logf("Submit(): %v", err)
	require.ErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() whose journal write no standby confirmed")
	require.Empty(t, requestsFor(srv, "sent"), "requests of an operation whose journal write no standby confirmed")
}
