package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// TestReadOnlyDatabase: a database that accepts no writes (the DSN now
// reaches a standby, or the primary was demoted in a failover) fails
// every write with the server's "read-only transaction" (SQLSTATE 25006):
// nothing written, not journal.ErrMaybeCommitted, and an error that says
// what happened and what to do; through the client, a Submit is told
// nothing was journaled (not idem.ErrUnknownOutcome) and sends nothing,
// and an operation journaled before is not sent while its attempt cannot
// be recorded.
func TestReadOnlyDatabase(t *testing.T) {
	ctx := context.Background()
	primary := openStore(t)
	now := time.Now().UTC()
	mustCreate(t, primary, "k")
	_, l, err := primary.Claim(ctx, "acct", "k", "a", now, now.Add(time.Minute))
	require.NoError(t, err)
	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	defer pool.Close()
	standby, err := pgjournal.New(pool, pgjournal.WithSchema(primary.Schema()))
	require.NoError(t, err)
	defer standby.Close()

	writes := map[string]func() error{
		"Create()": func() error {
			_, err := standby.Create(ctx, journaltest.NewRecord("acct", "new", now))
			return err
		},
		"CreateClaimed()": func() error {
			rec := journaltest.NewRecord("acct", "new", now)
			rec.Created = now
			_, _, err := standby.CreateClaimed(ctx, rec, "b", now.Add(time.Minute))
			return err
		},
		"Update()": func() error {
			_, err := standby.Update(journal.WithLease(ctx, l), "acct", "k", func(r *journal.Record) error {
				r.Review = "read-only"
				return nil
			})
			return err
		},
		"Claim()": func() error {
			_, _, err := standby.TakeOver(ctx, "acct", "k", "b", now, now.Add(time.Minute))
			return err
		},
		"ClaimDue()": func() error {
			_, err := standby.ClaimDue(ctx, "b", now.Add(time.Hour), now.Add(2*time.Hour), 10)
			return err
		},
		"Renew()": func() error {
			_, err := standby.Renew(ctx, l, l.Expires.Add(time.Hour))
			return err
		},
		"Release()": func() error { return standby.Release(ctx, l) },
	}
	for what, write := range writes {
		err := write()
		t.Logf("%s: %v", what, err)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, what)
		require.Equal(t, "25006", pgErr.Code, "%s: read_only_sql_transaction", what)
		require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s refused by a read-only database", what)
		for _, want := range []string{"accepts no writes", "nothing was written", "target_session_attrs=read-write"} {
			require.ErrorContains(t, err, want, what)
		}
	}
	_, err = standby.Get(ctx, "acct", "k")
	require.NoError(t, err, "Get() on a read-only database")

	r, err := primary.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Empty(t, r.Review, "a write the read-only database refused")
	_, err = primary.Renew(ctx, l, l.Expires.Add(time.Minute))
	require.NoError(t, err, "Renew() of the lease the read-only database refused to take over")
	_, err = primary.Get(ctx, "acct", "new")
	require.ErrorIs(t, err, journal.ErrNotFound, "a create the read-only database refused")

	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	c := newClient(t, standby, srv)
	_, err = c.Submit(ctx, order(srv, "submit"))
	t.Logf("Submit(): %v", err)
	require.Error(t, err)
	require.NotErrorIs(t, err, idem.ErrUnknownOutcome, "Submit() refused by a read-only database: nothing journaled")
	require.ErrorContains(t, err, "nothing was journaled")
	require.Empty(t, requestsFor(srv, "submit"), "requests of an operation not journaled")

	op, err := newClient(t, primary, srv).Prepare(ctx, order(srv, "prepared"))
	require.NoError(t, err)
	_, err = c.Do(ctx, op)
	t.Logf("Do(): %v", err)
	require.Error(t, err, "Do() of a journaled operation on a read-only database")
	require.Empty(t, requestsFor(srv, "prepared"), "requests of an operation whose attempt could not be recorded")
}
