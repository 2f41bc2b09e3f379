package pgjournal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

// unwrapping is a Store of the application's wrapping a pgjournal Store
// (metrics, say) that says which Store it wraps.
type unwrapping struct{ *pgjournal.Store }

func (u unwrapping) Unwrap() idem.Store { return u.Store }

// TestPrepareTxForAClientOfAnotherJournal: PrepareTx given a Client that
// journals elsewhere (a service whose other calls journal to a bbolt file,
// to another schema's Store, or to a Store of the same schema in another
// database) wrote the intent to this Store's table,
// committed with the order row, where that Client's Run never looks: the
// order was never charged (Resume and Run sent nothing, no error). Such a
// call is now refused before any statement, the transaction left usable;
// a Client on another Store value of the same schema and database
// (through PgBouncer too), or on a Store that unwraps to one, still
// journals there and is sent once.
func TestPrepareTxForAClientOfAnotherJournal(t *testing.T) {
	ctx := context.Background()
	srv, err := idemtest.NewServer()
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	pool, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	tests := []struct {
		name    string
		journal func(s *pgjournal.Store) idem.Store
		ok      bool
	}{
		{"a bbolt journal", func(*pgjournal.Store) idem.Store {
			j, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = j.Close() })
			return j
		}, false},
		{"another schema", func(*pgjournal.Store) idem.Store { return openStore(t) }, false},
		// Two databases each migrated with the default schema: a
		// service's orders database, whose pool PrepareTx shares (New),
		// and the journal database its Client was made on.
		{"the schema in another database", func(s *pgjournal.Store) idem.Store { return storeInAnotherDatabase(t, s.Schema()) }, false},
		{"another Store on the schema", func(s *pgjournal.Store) idem.Store {
			o, err := pgjournal.Open(ctx, dsn(t), pgjournal.WithSchema(s.Schema()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = o.Close() })
			return o
		}, true},
		{"a wrapper of this Store", func(s *pgjournal.Store) idem.Store { return unwrapping{s} }, true},
		// The same database reached another way: the Client's Store
		// through PgBouncer, the business transactions directly.
		{"a Store on the schema through PgBouncer", func(s *pgjournal.Store) idem.Store {
			o, err := pgjournal.Open(ctx, startPgBouncer(t)+"&default_query_exec_mode=exec", pgjournal.WithSchema(s.Schema()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = o.Close() })
			return o
		}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			c := newClient(t, tt.journal(s), srv)
			orders := pgx.Identifier{s.Schema(), "orders"}.Sanitize()
			_, err := pool.Exec(ctx, `CREATE TABLE `+orders+` (id text PRIMARY KEY)`)
			require.NoError(t, err)
			key := fmt.Sprintf("charge-order-%d", i)

			var prepErr error
			require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, prepErr = s.PrepareTx(ctx, tx, c, order(srv, key))
				// The transaction is still usable: the service may commit
				// its row and leave the charge to another path.
				_, err := tx.Exec(ctx, `INSERT INTO `+orders+` VALUES ('order-1')`)
				return err
			}), "the business transaction")
			_, err = c.Resume(ctx)
			require.NoError(t, err)
			if !tt.ok {
				require.ErrorIs(t, prepErr, idem.ErrInvalidRequest, "PrepareTx() for a Client of another journal")
				_, err = s.Get(ctx, idem.DefaultScope, key)
				require.ErrorIs(t, err, journal.ErrNotFound, "an intent no Run of the Client's would send")
				require.Zero(t, submits(srv, key), "submits")
				return
			}
			require.NoError(t, prepErr)
			requireChargedOnce(t, c, srv, key)
		})
	}
}

// requireChargedOnce asserts that key's operation succeeded, sent once,
// and made one order on srv.
func requireChargedOnce(t *testing.T, c *idem.Client, srv *idemtest.Server, key string) {
	t.Helper()
	op, err := c.Lookup(context.Background(), "", key)
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, op.State)
	require.Equal(t, 1, submits(srv, key), "submits")
	require.Equal(t, 1, srv.Effects("", key), "orders the server made")
}

// storeInAnotherDatabase is a migrated Store on schema in a database of
// its own on the test server, dropped when the test ends.
func storeInAnotherDatabase(t *testing.T, schema string) *pgjournal.Store {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	name := schema + "_db"
	_, err = admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
	})
	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	pc.ConnConfig.Database = name
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // after the Client's Close, which closes the Store
	o, err := pgjournal.New(pool, pgjournal.WithSchema(schema))
	require.NoError(t, err)
	require.NoError(t, o.Migrate(ctx))
	return o
}
