package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// forgetStatements makes pc's pool deallocate a connection's prepared
// statements each time it is released, behind pgx's back: what a pooler
// in transaction mode (PgBouncer before 1.21, or without
// max_prepared_statements) does to a client, whose next transaction may
// run on a server connection that never saw its statements, or saw
// another client's of the same name.
func forgetStatements(pc *pgxpool.Config) {
	pc.MaxConns = 1
	pc.AfterRelease = func(c *pgx.Conn) bool {
		_, err := c.Exec(context.Background(), "DEALLOCATE ALL")
		return err == nil
	}
}

// TestVanishedStatementsNameTheFix: behind a pooler in transaction mode,
// pgx's default statement cache finds its prepared statements gone: each
// call fails, as a statement the server refused (nothing written, not
// journal.ErrMaybeCommitted), with an error that says what to set
// (default_query_exec_mode=exec in the DSN), not only PostgreSQL's
// "prepared statement ... does not exist"; with that set, every call
// works.
func TestVanishedStatementsNameTheFix(t *testing.T) {
	ctx := context.Background()
	s := openStoreWith(t, forgetStatements)
	now := time.Now().UTC()
	_, err := s.Create(ctx, journaltest.NewRecord("acct", "k", now))
	require.NoError(t, err, "first Create(): its statements are prepared then")
	calls := map[string]func() error{
		"Create()": func() error {
			_, err := s.Create(ctx, journaltest.NewRecord("acct", "new", now))
			return err
		},
		"Update()": func() error {
			_, err := s.Update(ctx, "acct", "k", func(r *journal.Record) error {
				r.Review = "vanished"
				return nil
			})
			return err
		},
		"Get()": func() error {
			_, err := s.Get(ctx, "acct", "k")
			return err
		},
		"Claim()": func() error {
			_, _, err := s.Claim(ctx, "acct", "k", "o", now, now.Add(time.Minute))
			return err
		},
	}
	// Each call's statements are prepared on its first use, and gone by
	// its second.
	made := map[string]int{}
	for what, call := range calls {
		failed := 0
		for range 2 {
			err := call()
			if err == nil {
				made[what]++
				continue
			}
			failed++
			t.Logf("%s: %v", what, err)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, what)
			require.Equal(t, "26000", pgErr.Code, "%s: invalid_sql_statement_name", what)
			require.NotErrorIs(t, err, journal.ErrMaybeCommitted, "%s: a statement the server refused", what)
			require.ErrorContains(t, err, "default_query_exec_mode=exec", "%s: the error names the fix", what)
		}
		require.NotZero(t, failed, "%s whose prepared statements vanished", what)
	}

	fixed := openStoreWith(t, func(pc *pgxpool.Config) {
		forgetStatements(pc)
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec // default_query_exec_mode=exec
	})
	for _, k := range []string{"a", "b"} {
		_, err := fixed.Create(ctx, journaltest.NewRecord("acct", k, now))
		require.NoError(t, err, "Create(%s) in exec mode", k)
		for range 2 {
			_, err = fixed.Update(ctx, "acct", k, func(r *journal.Record) error {
				r.Review = "exec"
				return nil
			})
			require.NoError(t, err, "Update(%s) in exec mode", k)
			_, err = fixed.Get(ctx, "acct", k)
			require.NoError(t, err, "Get(%s) in exec mode", k)
			_, _, err = fixed.Claim(ctx, "acct", k, "o", now, now.Add(time.Minute))
			require.NoError(t, err, "Claim(%s) in exec mode", k)
		}
	}
	// What the failed calls left: nothing, once read by a plain pool.
	plain, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(s.Schema()))
	require.NoError(t, err)
	defer plain.Close()
	r, err := plain.Get(ctx, "acct", "k")
	require.NoError(t, err)
	if made["Update()"] == 0 {
		require.Empty(t, r.Review, "an Update() that failed was written")
	}
	if made["Create()"] == 0 {
		_, err = plain.Get(ctx, "acct", "new")
		require.ErrorIs(t, err, journal.ErrNotFound, "a Create() that failed was written")
	}
	if made["Claim()"] == 0 {
		_, _, err = plain.Claim(ctx, "acct", "k", "p", now, now.Add(time.Minute))
		require.NoError(t, err, "Claim() of a record no failed Claim() leased")
	}
}
