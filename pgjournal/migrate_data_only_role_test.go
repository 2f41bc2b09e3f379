package pgjournal_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal/journaltest"
	"github.com/idemkit/idem/pgjournal"
)

// TestMigrateDataOnlyRole: a service whose role may read and write the
// journal's tables and nothing more (its schema made by a deployment
// role, as least privilege has it), calling Migrate at start-up as the
// README says. PostgreSQL's CREATE SCHEMA: "To create a schema, the
// invoking user must have the CREATE privilege for the current
// database" (sql-createschema.html), and IF NOT EXISTS does not spare
// the check (modelled on PostgreSQL 15, which checks the privilege
// before it looks for the schema). Migrate ran CREATE SCHEMA IF NOT
// EXISTS whatever the schema's version, so it failed with "permission
// denied for database" on a schema already at SchemaVersion, and the
// service never started. It now reads the version first and returns.
// A schema that needs a step still takes the locked way, and a role
// without the rights still fails there, having changed nothing.
func TestMigrateDataOnlyRole(t *testing.T) {
	ctx := context.Background()
	migrated := openStore(t) // by the deployment's role
	admin, err := pgxpool.New(ctx, dsn(t))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	role := fmt.Sprintf("idem_data_%d_%d", os.Getpid(), schemas.Add(1))
	const password = "data-only"
	schema := pgx.Identifier{migrated.Schema()}.Sanitize()
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` LOGIN PASSWORD '` + password + `'`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
	} {
		_, err := admin.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = admin.Exec(context.Background(), `DROP ROLE `+role)
	})
	var mayCreate bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT has_database_privilege($1, current_database(), 'CREATE')`, role).Scan(&mayCreate))
	require.False(t, mayCreate, "the role may not create schemas")

	pc, err := pgxpool.ParseConfig(dsn(t))
	require.NoError(t, err)
	pc.ConnConfig.User, pc.ConnConfig.Password = role, password
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgjournal.New(pool, pgjournal.WithSchema(migrated.Schema()))
	require.NoError(t, err)

	require.NoError(t, s.Migrate(ctx), "Migrate() by a role with data rights alone, on a schema at version %d", pgjournal.SchemaVersion)
	rec := journaltest.NewRecord("acct", "k", time.Now())
	_, err = s.Create(ctx, rec)
	require.NoError(t, err, "Create() by the data role")
	got, err := migrated.Get(ctx, "acct", "k")
	require.NoError(t, err)
	require.Equal(t, rec.Key, got.Key)

	// A step to make: the data role cannot, and changes nothing.
	versions := pgx.Identifier{migrated.Schema(), "schema_version"}.Sanitize()
	_, err = admin.Exec(ctx, `DELETE FROM `+versions+` WHERE version = $1`, pgjournal.SchemaVersion)
	require.NoError(t, err)
	require.ErrorContains(t, s.Migrate(ctx), "permission denied", "Migrate() by the data role of a schema a step behind")
	var version int
	require.NoError(t, admin.QueryRow(ctx, `SELECT max(version) FROM `+versions).Scan(&version))
	require.Equal(t, pgjournal.SchemaVersion-1, version, "version after the data role's refused Migrate")
	require.NoError(t, migrated.Migrate(ctx), "Migrate() by the deployment's role")
	require.NoError(t, s.Migrate(ctx), "Migrate() by the data role once migrated again")
}
