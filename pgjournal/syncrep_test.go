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
	store, srv, c, _ := startSyncRepRig(t, "&statement_timeout=300")

	_, err := store.Update(ctx, "acct", "k", func(r *journal.Record) error {
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

// startSyncRepRig starts a private server whose commits wait for a
// synchronous standby that never confirms (none is connected), and opens
// on it a migrated Store (its DSN with params added, its calls bounded to
// 3 s) holding the record "k" of scope "acct", a fake API server and a
// client of both, and an admin connection; cleanup closes them.
func startSyncRepRig(t *testing.T, params string) (*pgjournal.Store, *idemtest.Server, *idem.Client, *pgx.Conn) {
	t.Helper()
	return startSyncRepRigWith(t, func(dsn string) (*pgjournal.Store, error) {
		return pgjournal.Open(context.Background(), dsn+params, pgjournal.WithCallTimeout(3*time.Second))
	})
}

// startSyncRepRigWith is startSyncRepRig with a Store open makes on the
// private server's DSN.
func startSyncRepRigWith(t *testing.T, open func(dsn string) (*pgjournal.Store, error)) (*pgjournal.Store, *idemtest.Server, *idem.Client, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	pg := startPrivateServer(t)
	store, err := open(pg.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.Migrate(ctx))
	mustCreate(t, store, "k")
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := newClient(t, store, srv)
	admin, err := pgx.Connect(ctx, pg.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	syncStandby(t, admin, "ghost")
	return store, srv, c, admin
}
