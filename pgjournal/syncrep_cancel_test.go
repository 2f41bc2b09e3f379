package pgjournal_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// TestCancelledSyncRepWait: the journal's COMMIT waits for a synchronous
// standby that does not confirm, and an operator (or a tool that cancels
// long queries) cancels it with pg_cancel_backend. PostgreSQL answers the
// COMMIT as made, with only a WARNING, "canceling wait for synchronous
// replication due to user request", DETAIL "The transaction has already
// committed locally, but might not have been replicated to the standby."
// (SyncRepWaitForLSN in src/backend/replication/syncrep.c; the answer
// as psql shows it, "WARNING: 01000: canceling wait ... COMMIT":
// https://paquier.xyz/postgresql-2/track-commit-synchronous).
// A failover to the standby then loses the write: an operation sent, its
// record gone. The write reports that it may have committed
// (journal.ErrMaybeCommitted), the client tells the Submit the outcome is
// unknown and sends nothing, and once the standby confirms the write is
// read back and the same Submit settles it with one order.
func TestCancelledSyncRepWait(t *testing.T) {
	ctx := context.Background()
	store, srv, c, admin := startSyncRepRig(t, "")
	cancelBackend := func(pid int32) {
		t.Helper()
		var ok bool
		require.NoError(t, admin.QueryRow(ctx, `SELECT pg_cancel_backend($1)`, pid).Scan(&ok))
		require.True(t, ok, "pg_cancel_backend(%d)", pid)
	}

	err, submitErr := endSyncRepWaits(t, store, c, srv, admin, "cancelled in commit", cancelBackend)
	require.ErrorIs(t, err, journal.ErrMaybeCommitted, "Update() whose COMMIT no standby confirmed")
	require.ErrorIs(t, submitErr, idem.ErrUnknownOutcome, "Submit() whose journal write no standby confirmed")
	require.Empty(t, requestsFor(srv, "sent"), "requests of an operation whose journal write no standby confirmed")

	syncStandby(t, admin, "")
	r, err := store.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Equal(t, "cancelled in commit", r.Review, "the write committed locally")
	res, err := c.Submit(ctx, order(srv, "sent"))
	require.NoError(t, err, "the same Submit again")
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Equal(t, 1, srv.Effects("", "sent"), "orders for the operation")
}
