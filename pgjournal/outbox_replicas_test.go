package pgjournal_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestPrepareTxDrivenOnce: operations journaled with PrepareTx are due at
// once; two replicas' Run, and a Do for each on both replicas, all race
// for them: each is sent exactly once and settles.
func TestPrepareTxDrivenOnce(t *testing.T) {
	const n = 24
	ctx := context.Background()
	schema := openStore(t).Schema()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	a, as := replica(t, ctx, schema, "replica-a", srv, idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
	b, _ := replica(t, ctx, schema, "replica-b", srv, idem.WithReconcile(20*time.Millisecond, time.Minute, time.Hour))
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	defer pool.Close()

	var ops []*idem.Operation
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := range n {
			op, err := as.PrepareTx(ctx, tx, a, order(srv, fmt.Sprintf("k%d", i)))
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
		return nil
	}))

	runCtx, stop := context.WithCancel(ctx)
	var runs sync.WaitGroup
	for _, c := range []*idem.Client{a, b} {
		runs.Add(1)
		go func() {
			defer runs.Done()
			_ = c.Run(runCtx)
		}()
	}
	var dos sync.WaitGroup
	for _, op := range ops {
		for _, c := range []*idem.Client{a, b} {
			dos.Add(1)
			go func() {
				defer dos.Done()
				_, _ = c.Do(ctx, op)
			}()
		}
	}
	dos.Wait()
	waitFor(t, "every operation settled", func() bool {
		for _, op := range ops {
			got, err := a.Lookup(ctx, op.Scope, op.Key)
			if err != nil || got.State != idem.StateSucceeded {
				return false
			}
		}
		return true
	})
	stop()
	runs.Wait()
	for _, op := range ops {
		require.Equal(t, 1, submits(srv, op.Key), "submits for %s across both replicas", op.Key)
	}
}
