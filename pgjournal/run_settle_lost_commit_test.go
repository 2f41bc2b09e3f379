package pgjournal_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// TestRunSettleCommitAnswerLost: an outbox operation (PrepareTx), which
// only Run sends and only the settle func reports, is sent by Run and
// answered; the COMMIT of its outcome reaches PostgreSQL but its answer
// is lost (the connection, or a pooler's to the server, broke:
// journal.ErrMaybeCommitted). The operation is settled in the journal,
// so no Run visits it again: unless the visit that wrote it reads it
// back, nobody ever tells the application that the order it handed off
// was charged. It is told once, and the order sent once.
func TestRunSettleCommitAnswerLost(t *testing.T) {
	ctx := context.Background()
	s, cutter := openCutStore(t)
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	calls := newSettleCalls()
	c := newClient(t, s, srv, append(calls.options(),
		idem.WithLease("replica-a", idem.DefaultLeaseDuration),
		idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))...)
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := s.PrepareTx(ctx, tx, c, order(srv, "k"))
		return err
	}), "the business transaction with the intent")
	// The settling write is the only one whose parameters say succeeded
	// (its state column).
	cutter.arm(string(journal.StateSucceeded), afterCommit)
	runCtx, stop := context.WithCancel(ctx)
	var run sync.WaitGroup
	run.Add(1)
	go func() {
		defer run.Done()
		_ = c.Run(runCtx)
	}()
	require.True(t, cutter.wait(t), "the outcome's write committed")
	waitFor(t, "the settle func told", func() bool {
		_, fn := calls.counts("k")
		return fn > 0
	})
	stop()
	run.Wait()

	op, err := c.Lookup(ctx, "", "k")
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State, "journaled state")
	hook, fn := calls.counts("k")
	require.Equal(t, 1, hook, "settle hook calls")
	require.Equal(t, 1, fn, "settle func calls")
	require.Equal(t, 1, submits(srv, "k"), "submits")
	require.Equal(t, 1, srv.Effects("", "k"), "side effects")
}
