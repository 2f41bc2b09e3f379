package pgjournal_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestResumeAndRunOutliveOpenRecordFromNewerIdem: after a rollback, an
// open operation the newer idem journaled in a record version this build
// does not read made Resume fail at start-up and Run stop on its first
// pass (ClaimDue rolled its whole batch back), and no other operation
// sharing the journal was sent or confirmed again. Resume and Run skip
// it and settle every other operation once; a Submit of its key still
// fails with ErrVersion and sends nothing.
func TestResumeAndRunOutliveOpenRecordFromNewerIdem(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	c := newClient(t, store, srv)
	for _, k := range []string{"k0", "k1"} {
		_, err := c.Prepare(ctx, order(srv, k))
		require.NoError(t, err)
	}
	// Due at once (an outbox's intent), so that it is first in Run's due
	// scan, ahead of k2.
	prepareNow := func(c *idem.Client, key string) {
		conn, err := pgx.Connect(ctx, dsn(t))
		require.NoError(t, err)
		defer conn.Close(ctx)
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = store.PrepareTx(ctx, tx, c, order(srv, key))
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	prepareNow(c, "newer")
	setNewer(t, store, idem.DefaultScope, "newer")

	// The process stops; the next one resumes.
	require.NoError(t, c.Close())
	restarted := newClient(t, store, srv)
	sum, err := restarted.Resume(ctx)
	require.NoError(t, err, "Resume at start-up")
	require.Equal(t, idem.Summary{Visited: 2, Succeeded: 2}, sum)
	checkSettledOnce(t, store, srv, []string{"k0", "k1"})

	_, err = restarted.Submit(ctx, order(srv, "newer"))
	require.ErrorIs(t, err, journal.ErrVersion)
	require.Zero(t, submits(srv, "newer"))

	prepareNow(restarted, "k2")
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- restarted.Run(runCtx) }()
	var ended error
	waitFor(t, "Run settled k2", func() bool {
		select {
		case ended = <-ran:
			return true
		default:
		}
		op, err := restarted.Lookup(ctx, "", "k2")
		return err == nil && op.State == idem.StateSucceeded
	})
	require.NoError(t, ended, "Run ended before it settled k2")
	stop()
	require.ErrorIs(t, <-ran, context.Canceled)
	checkSettledOnce(t, store, srv, []string{"k0", "k1", "k2"})
	require.Zero(t, srv.Effects("", "newer"))
	require.Zero(t, submits(srv, "newer"))

	st, err := restarted.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Newer)
	require.Zero(t, st.Open)
}
