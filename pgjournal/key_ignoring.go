package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// keyIgnoringTable is the quoted table of the endpoints that ignore the
// key (migrations/0002_key_ignoring.sql).
func (s *Store) keyIgnoringTable() string {
	return pgx.Identifier{s.schema, "key_ignoring"}.Sanitize()
}

// unkept marks err as idem.ErrKeyIgnoringUnkept when it is the table
// missing (ErrNotMigrated): a schema at version 1, the new build deployed
// before Migrate ran, whose records work. The Client reads it as no
// endpoint kept and logs it, where an error would hold every resend.
func unkept(err error) error {
	if errors.Is(err, ErrNotMigrated) {
		return fmt.Errorf("%w: %w", idem.ErrKeyIgnoringUnkept, err)
	}
	return err
}

// AddKeyIgnoring records that endpoint (method, space, URL without its
// query) ignores the idempotency key, for every replica and every later
// process (idem.KeyIgnoringStore), in a transaction of its own. One
// already recorded writes nothing and returns nil. One more past
// journal.MaxKeyIgnoringEndpoints (replicas adding at once may pass it by
// a few) writes nothing and is journal.ErrKeyIgnoringFull: read as
// recorded, the Client would clear the last flag that tells the next
// process of the endpoint. An empty endpoint, one longer than journal.MaxKeyIgnoringEndpoint,
// not valid UTF-8 or holding a NUL, is journal.ErrInvalid, unsent. On a
// schema Migrate has not brought to version 2, the error matches
// idem.ErrKeyIgnoringUnkept and ErrNotMigrated.
func (s *Store) AddKeyIgnoring(ctx context.Context, endpoint string) error {
	if err := s.usable(ctx); err != nil {
		return errorf("add endpoint ignoring the key: %w", err)
	}
	if endpoint == "" || len(endpoint) > journal.MaxKeyIgnoringEndpoint || !utf8.ValidString(endpoint) || strings.ContainsRune(endpoint, 0) {
		return errorf("add endpoint ignoring the key: %w: %d bytes, up to %d of valid UTF-8 without NUL taken",
			journal.ErrInvalid, len(endpoint), journal.MaxKeyIgnoringEndpoint)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	t := s.keyIgnoringTable()
	var inserted, kept bool
	err := s.bounded(ctx, "add endpoint ignoring the key", func(b *pgx.Batch) {
		b.Queue(`INSERT INTO `+t+` (endpoint)
			SELECT $1 WHERE (SELECT count(*) FROM `+t+`) < $2 ON CONFLICT DO NOTHING`,
			endpoint, journal.MaxKeyIgnoringEndpoints).Exec(func(tag pgconn.CommandTag) error {
			inserted = tag.RowsAffected() > 0
			return nil
		})
		// Nothing inserted: kept already (a conflict, another replica's
		// row included: this statement's snapshot is taken after the
		// INSERT's wait for it), or the table full.
		b.Queue(`SELECT EXISTS (SELECT FROM `+t+` WHERE endpoint = $1)`, endpoint).QueryRow(func(row pgx.Row) error {
			return row.Scan(&kept)
		})
	})
	if err != nil {
		return unkept(errorf("add endpoint ignoring the key: %w", err))
	}
	if !inserted && !kept {
		return errorf("add endpoint ignoring the key: %w", journal.ErrKeyIgnoringFull)
	}
	return nil
}

// KeyIgnoringEndpoints returns the endpoints AddKeyIgnoring recorded, in
// byte order. On a schema Migrate has not brought to version 2, the error
// matches idem.ErrKeyIgnoringUnkept and ErrNotMigrated: the Client reads
// it as none recorded.
func (s *Store) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	if err := s.usable(ctx); err != nil {
		return nil, errorf("read the endpoints ignoring the key: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT endpoint FROM `+s.keyIgnoringTable()+` ORDER BY endpoint`)
	if err != nil {
		return nil, unkept(errorf("read the endpoints ignoring the key: %w", readErr(ctx, err)))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, unkept(errorf("read the endpoints ignoring the key: %w", readErr(ctx, err)))
	}
	return out, nil
}

// RemoveKeyIgnoring forgets endpoint, as AddKeyIgnoring recorded it, and
// reports whether it was recorded: for an operator whose provider has
// since made the endpoint de-duplicate by the key (as DELETE FROM
// <schema>.key_ignoring WHERE endpoint = '...' does). A Client that
// learnt it keeps it in memory until it is closed (its ForgetKeyIgnoring
// forgets it in both), and learns it again from an operation still open
// and flagged for it (ReviewKeyIgnored). It flags nothing:
// idem.RemoveKeyIgnoring first flags the open operations there that may
// have executed, which a process that no longer knows the endpoint would
// resend. On a schema Migrate has not brought to version 2, the error
// matches idem.ErrKeyIgnoringUnkept and ErrNotMigrated.
func (s *Store) RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, errorf("remove endpoint ignoring the key: %w", err)
	}
	if endpoint == "" || strings.ContainsRune(endpoint, 0) || !utf8.ValidString(endpoint) {
		return false, nil // never recorded
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.execBounded(ctx, "remove endpoint ignoring the key", `DELETE FROM `+s.keyIgnoringTable()+` WHERE endpoint = $1`, endpoint)
	if err != nil {
		// As reading them: a schema with no table for them keeps none,
		// which Client.ForgetKeyIgnoring takes for nothing to remove.
		return false, unkept(errorf("remove endpoint ignoring the key: %w", err))
	}
	return tag.RowsAffected() > 0, nil
}
