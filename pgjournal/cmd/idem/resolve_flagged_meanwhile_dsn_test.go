package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// resolve on the live PostgreSQL journal holds the operation's lease,
// which fences replicas' drives but not a webhook's Confirm: another
// replica's Confirm flags an operation it knows to have been sent twice
// to an endpoint that ignores the key ReviewKeyIgnored, unleased
// (markIgnoredBeforeConfirm), before its confirmation settles it. That
// flag, landing after resolve read acct-2's k-other unflagged and before
// its write (the replica killed before the confirmation, its save of the
// endpoint never committed: modelled, Solidgate's per-endpoint
// "ignored", https://api-docs.solidgate.com/api/v2/idempotent-requests),
// was cleared by the resolution, the endpoint journaled nowhere: a
// replica started afterwards resent k-pending there under the same key.
// resolve now writes nothing over it and says to run again, which
// journals the endpoint first.
func TestDSNResolveOfAnOperationFlaggedKeyIgnoredWhileResolvingWritesNothing(t *testing.T) {
	pg := newPG(t)
	seed(t, pg.store, records(newDSNMode().now()))
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(pg.dsn)
	require.NoError(t, err)
	flagger := &flagBeforeWriteRead{flag: func() {
		_, err := pg.store.Update(ctx, "acct-2", "k-other", func(r *journal.Record) error {
			r.Review = journal.ReviewKeyIgnored
			return nil
		})
		require.NoError(t, err, "the other replica's flag")
	}}
	pc.ConnConfig.Tracer = flagger
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgjournal.New(pool, pgjournal.WithSchema(pg.schema))
	require.NoError(t, err)
	b := &pgBackend{s: s, where: "the test server", m: newDSNMode()}
	m := journal.Manual{State: journal.StateSucceeded, Reason: "one charge in the dashboard", By: "ops", At: newDSNMode().now()}

	_, _, err = b.Resolve(ctx, "acct-2", "k-other", m, false)
	require.ErrorContains(t, err, "run resolve again", "flagged while being resolved")
	got, err := pg.store.Get(ctx, "acct-2", "k-other")
	require.NoError(t, err)
	require.Equal(t, journal.StateProcessing, got.State, "journal: k-other left open")
	require.Equal(t, journal.ReviewKeyIgnored, got.Review, "journal: k-other still flagged, the endpoint's one trace")

	got, _, err = b.Resolve(ctx, "acct-2", "k-other", m, false)
	require.NoError(t, err, "run again")
	require.Equal(t, journal.StateSucceeded, got.State, "journal: k-other resolved")
	kept, err := pg.store.KeyIgnoringEndpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{ordersEndpoint}, kept, "endpoints journaled as ignoring the key")
}

// flagBeforeWriteRead runs flag once, just before the first read of a
// write's round (the committer's, which reads version and lease token):
// after resolve's Get, before its write.
type flagBeforeWriteRead struct {
	once sync.Once
	flag func()
}

func (f *flagBeforeWriteRead) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(strings.TrimSpace(data.SQL), "SELECT scope, key, data, version, lease_token") {
		f.once.Do(f.flag)
	}
	return ctx
}

func (f *flagBeforeWriteRead) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
