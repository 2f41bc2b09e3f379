package pgjournal

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migration is one numbered step of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its number", base)
		}
		b, err := migrations.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{v, base, string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// SchemaVersion is the schema version this build writes and reads.
const SchemaVersion = 2

// Migrate creates the journal's schema, or brings it up to SchemaVersion,
// each step in its own transaction, and records the version reached. Each
// of its transactions holds a PostgreSQL advisory lock (per schema), so
// replicas starting at once may all call it: one migrates, the others
// wait and then find nothing to do. A schema already at SchemaVersion is
// only read, without the lock: a service whose role may read and write
// the journal's tables but create nothing (the schema migrated by a
// deployment role) may call it too. A schema newer than this build is an
// error: upgrade idem. Run it at start-up, before the Client.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.usable(ctx); err != nil {
		return errorf("migrate: %w", err)
	}
	steps, err := loadMigrations()
	if err != nil {
		return errorf("migrate: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return errorf("migrate: %w", err)
	}
	defer conn.Release()
	schema := pgx.Identifier{s.schema}.Sanitize()
	versions := pgx.Identifier{s.schema, "schema_version"}.Sanitize()
	newer := func(current int) error {
		return errorf("migrate: schema %s is at version %d, newer than this build's %d: upgrade idem", schema, current, SchemaVersion)
	}
	// A schema at this build's version or newer is read without the lock
	// and without DDL: PostgreSQL checks CREATE's privilege before it
	// looks whether a schema or table exists, so CREATE SCHEMA IF NOT
	// EXISTS fails a service whose role has data rights alone (its schema
	// migrated by a deployment role) at every start-up. A step commits
	// with its version, so the version read means every step before it is
	// made. Any error (no schema yet, no right to read the versions) goes
	// the locked way, which makes what is missing or says why it cannot.
	var current int
	if conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+versions).Scan(&current) == nil && current >= SchemaVersion {
		if current > SchemaVersion {
			return newer(current)
		}
		s.noteDatabase(ctx, conn)
		return nil
	}
	// The lock is each transaction's (pg_advisory_xact_lock), never the
	// session's: behind a pooler in transaction mode (PgBouncer) a
	// session's lock outlives the transaction on a server connection
	// that other clients then share, and hold it through, and that the
	// unlock may never reach (a later Migrate waits for it for ever).
	//
	// And each runs READ COMMITTED whatever the database's or role's
	// default_transaction_isolation: under REPEATABLE READ or SERIALIZABLE
	// the snapshot is taken by the lock's statement, before it waits, so
	// a replica that waited while another made a step read the versions
	// as they were before it and made the step again (relation already
	// exists: its start-up failed).
	readCommitted := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	locked := func(tx pgx.Tx) (current int, err error) {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID(s.schema)); err != nil {
			return 0, fmt.Errorf("advisory lock: %w", err)
		}
		// Whether the schema exists is asked of pg_namespace, after the
		// lock, not left to CREATE SCHEMA IF NOT EXISTS: that looks the
		// name up in the backend's catalog cache, which the lock does not
		// bring up to date, and the unlocked read above, on this backend or
		// (behind a pooler) another replica's on it, cached the schema's
		// absence; a replica that waited here while another created it
		// then created it again and failed (duplicate key value violates
		// unique constraint "pg_namespace_nspname_index"). This statement
		// reads what committed before it, and opening pg_namespace brings
		// the cache up to date for the statements after it.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = $1)`, s.schema).Scan(&exists); err != nil {
			return 0, fmt.Errorf("schema %s: %w", schema, err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
				return 0, fmt.Errorf("create schema %s: %w", schema, err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versions+` (version int NOT NULL)`); err != nil {
			return 0, err
		}
		err = tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+versions).Scan(&current)
		return current, err
	}
	err = pgx.BeginTxFunc(ctx, conn, readCommitted, func(tx pgx.Tx) (err error) {
		current, err = locked(tx)
		return err
	})
	if err != nil {
		return errorf("migrate: %w", err)
	}
	if current > SchemaVersion {
		return newer(current)
	}
	for _, m := range steps {
		if m.version <= current {
			continue
		}
		err := pgx.BeginTxFunc(ctx, conn, readCommitted, func(tx pgx.Tx) error {
			// Made meanwhile by another replica's Migrate?
			now, err := locked(tx)
			if err != nil || now >= m.version {
				return err
			}
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{{schema}}", schema)); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO `+versions+` (version) VALUES ($1)`, m.version)
			return err
		})
		if err != nil {
			return errorf("migrate: %s: %w", m.name, err)
		}
	}
	s.noteDatabase(ctx, conn)
	return nil
}

// noteDatabase reads, if it can, the database s's pool reaches
// (databaseID) on conn, a connection Migrate holds, for PrepareTx to
// compare with its transaction's: read by PrepareTx's first call on a
// pool the application's transactions share (New), it would wait for a
// connection those transactions may all hold, its own among them, and
// fail after WithCallTimeout.
func (s *Store) noteDatabase(ctx context.Context, conn queryer) {
	var id string
	if s.database.Load() == nil && conn.QueryRow(ctx, databaseIDSQL).Scan(&id) == nil {
		s.database.Store(&id)
	}
}

// lockID is the advisory lock of a schema's migrations.
func lockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("idem pgjournal migrate " + schema))
	return int64(h.Sum64())
}

// DropSchema drops schema and everything in it: the journal's records
// too. It is for tests and for taking a journal down for good.
func (s *Store) DropSchema(ctx context.Context, schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("%w: schema %q", ErrConfig, schema)
	}
	if _, err := s.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		return errorf("drop schema: %w", err)
	}
	return nil
}
