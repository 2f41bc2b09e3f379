package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemkit/idem/journal"
)

// scanRecords decodes the data column of every row.
func scanRecords(rows pgx.Rows) ([]*journal.Record, error) {
	var out []*journal.Record
	var data pgtype.UndecodedBytes
	_, err := pgx.ForEachRow(rows, []any{&data}, func() error {
		r, err := storedRecord(data)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// openPage is how many open records ForEachOpen reads at a time.
const openPage = 256

// ForEachOpen calls fn for every open record, soonest due first, outside
// any transaction, each at most once; see idem.Store. It reads a page of
// the open index at a time. It skips a record written by a newer idem,
// and WithLogger's logger names it once.
func (s *Store) ForEachOpen(ctx context.Context, fn func(*journal.Record) error) error {
	if err := s.usable(ctx); err != nil {
		return errorf("for each open: %w", err)
	}
	// fn may reschedule a record into the part not read yet: remember
	// what was visited (the cost grows with the open records only).
	seen := make(map[[2]string]bool)
	// No scope is empty: the first page starts after ("", "") at the
	// smallest time, the zero time's.
	afterDue, afterScope, afterKey := int64(math.MinInt64), "", ""
	for {
		page, dues, err := s.openPage(ctx, afterDue, afterScope, afterKey)
		if err != nil {
			return errorf("for each open: %w", err) // named by openPage
		}
		for i, r := range page {
			afterDue, afterScope, afterKey = dues[i].due, dues[i].scope, dues[i].key
			if r == nil {
				// Written by a newer idem: failing on it would stop
				// Resume and Run from settling every other record.
				s.skippedNewer(ctx, dues[i].scope, dues[i].key)
				continue
			}
			id := [2]string{r.Scope, r.Key}
			if seen[id] {
				continue
			}
			seen[id] = true
			if err := ctx.Err(); err != nil {
				return errorf("for each open: %w", err)
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < openPage {
			return nil
		}
	}
}

// openRow is where a row of openPage stands in the open index.
type openRow struct {
	due        int64
	scope, key string
}

// openPage reads the page of open records after (afterDue, afterScope,
// afterKey), soonest due first, and where each stands. A record written
// by a newer idem is nil in page. Each page is one call to the database
// (see bound): ForEachOpen's fn may take long.
func (s *Store) openPage(ctx context.Context, afterDue int64, afterScope, afterKey string) (page []*journal.Record, at []openRow, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT data, next_due_ns, scope, key FROM `+s.table+`
		WHERE open AND (next_due_ns, scope, key) > ($1, $2, $3)
		ORDER BY next_due_ns, scope, key LIMIT $4`,
		afterDue, afterScope, afterKey, openPage)
	if err != nil {
		return nil, nil, readErr(ctx, err)
	}
	var data pgtype.UndecodedBytes
	var o openRow
	_, err = pgx.ForEachRow(rows, []any{&data, &o.due, &o.scope, &o.key}, func() error {
		r, err := storedRecord(data)
		if err != nil && !errors.Is(err, journal.ErrVersion) {
			return err
		}
		page, at = append(page, r), append(at, o)
		return nil
	})
	return page, at, readErr(ctx, err)
}

// Due returns up to limit open records whose NextDue is not after by; see
// idem.Store. A record written by a newer idem is left out (notNewerSQL).
func (s *Store) Due(ctx context.Context, by time.Time, limit int) ([]*journal.Record, error) {
	if err := s.usable(ctx); err != nil {
		return nil, errorf("due: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT data FROM `+s.table+` WHERE open AND next_due_ns <= $1 AND `+notNewerSQL(3)+`
		ORDER BY next_due_ns, scope, key LIMIT $2`, ns(by), lim, newestVersion)
	if err != nil {
		return nil, errorf("due: %w", readErr(ctx, err))
	}
	out, err := scanRecords(rows)
	if err != nil {
		return nil, errorf("due: %w", readErr(ctx, err))
	}
	return out, nil
}

// List returns the records f selects, in (Scope, Key) order. A record
// written by a newer idem is left out (notNewerSQL), as the bbolt
// journal leaves it out; Stats counts those.
func (s *Store) List(ctx context.Context, f journal.Filter) ([]*journal.Record, error) {
	if err := s.usable(ctx); err != nil {
		return nil, errorf("list: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Scope != "" {
		if err := journal.CheckID(f.Scope, "-"); err != nil {
			return nil, errorf("list: %w", err) // a NUL byte PostgreSQL's text refuses
		}
		where = append(where, "scope = "+arg(f.Scope))
	}
	if f.After != (journal.Position{}) {
		if strings.IndexByte(f.After.Scope, 0) >= 0 || strings.IndexByte(f.After.Key, 0) >= 0 {
			return nil, errorf("list: NUL byte in Filter.After: %w", journal.ErrInvalid) // as the bbolt journal refuses it
		}
		// A row comparison the primary key's index answers, in the
		// columns' "C" collation: byte order, as the bbolt journal lists.
		where = append(where, "(scope, key) > ("+arg(f.After.Scope)+", "+arg(f.After.Key)+")")
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		where = append(where, "state = ANY("+arg(states)+")")
	}
	if f.Open {
		where = append(where, "open")
	}
	if f.Review {
		where = append(where, "review")
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "created_ns < "+arg(ns(f.CreatedBefore)))
	}
	// Left out in the query, as the bbolt journal leaves it out: a
	// record written by a newer idem, which scanRecords would fail on,
	// takes no place in the limit.
	args = append(args, newestVersion)
	where = append(where, notNewerSQL(len(args)))
	q := `SELECT data FROM ` + s.table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += ` ORDER BY scope, key`
	if f.Limit > 0 {
		q += " LIMIT " + arg(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, errorf("list: %w", readErr(ctx, err))
	}
	out, err := scanRecords(rows)
	if err != nil {
		return nil, errorf("list: %w", readErr(ctx, err))
	}
	return out, nil
}

// pruneChunk bounds one Prune statement: a large backlog is deleted in
// several short transactions, not one that holds locks for long.
const pruneChunk = 500

// Prune deletes terminal records settled before the cut-off, in chunks of
// pruneChunk, and returns how many it deleted (those of the chunks done
// before an error included). It never deletes an open record, nor one
// flagged for review (journal.Record.Prunable).
func (s *Store) Prune(ctx context.Context, settledBefore time.Time) (int, error) {
	total := 0
	for {
		if err := s.usable(ctx); err != nil {
			return total, errorf("prune: %w", err)
		}
		n, err := s.pruneSome(ctx, settledBefore)
		if err != nil {
			return total, errorf("prune: %w", err)
		}
		total += n
		if n < pruneChunk {
			return total, nil
		}
	}
}

// pruneSome deletes up to pruneChunk terminal records, not flagged for
// review, settled before the cut-off, in one call to the database (see
// bound), in a transaction of its own (bounded: its error says whether
// the deletions may have committed).
func (s *Store) pruneSome(ctx context.Context, settledBefore time.Time) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.execBounded(ctx, "prune", `DELETE FROM `+s.table+` WHERE (scope, key) IN (
		SELECT scope, key FROM `+s.table+` WHERE NOT open AND NOT review AND settled_ns < $1 LIMIT $2
		FOR UPDATE SKIP LOCKED)`, ns(settledBefore), pruneChunk)
	return int(tag.RowsAffected()), err
}

// NewerOpen counts the open records written by a newer idem (Stats'
// NewerOpen; a rollback left them), reading the open rows only, through
// the index of open records (records_due): idem.RemoveKeyIgnoring asks it
// before removing an endpoint (idem.NewerOpenCounter), and Stats, which
// reads the whole table, timed out on a large retained one, failing every
// removal.
func (s *Store) NewerOpen(ctx context.Context) (int, error) {
	if err := s.usable(ctx); err != nil {
		return 0, errorf("count newer open records: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.table+` WHERE open AND NOT `+notNewerSQL(1), newestVersion).Scan(&n); err != nil {
		return 0, errorf("count newer open records: %w", readErr(ctx, err))
	}
	return n, nil
}

// Stats counts the journal's records by state, as the bbolt journal's
// Stats does (for the operator tool); FileSize is the table's size on
// disk, indexes included. It reads every record's state column and the
// first bytes of its data (written by a newer idem: Newer), not the
// records.
func (s *Store) Stats(ctx context.Context) (journal.Stats, error) {
	if err := s.usable(ctx); err != nil {
		return journal.Stats{}, errorf("stats: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	st := journal.Stats{ByState: make(map[journal.State]int)}
	// A record written by a newer idem is counted as the bbolt journal,
	// which cannot read its state, counts it: in Newer and Total only,
	// and in NewerOpen when its open column (the newer idem's) says so,
	// as the bbolt journal counts one in its open index.
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FILTER (WHERE readable), count(*) FILTER (WHERE review AND readable),
		count(*) FILTER (WHERE NOT readable), count(*) FILTER (WHERE NOT readable AND open)
		FROM (SELECT state, review, open, `+notNewerSQL(1)+` AS readable FROM `+s.table+`) AS r GROUP BY state`, newestVersion)
	if err != nil {
		return journal.Stats{}, errorf("stats: %w", readErr(ctx, err))
	}
	var state string
	var n, review, newer, newerOpen int
	_, err = pgx.ForEachRow(rows, []any{&state, &n, &review, &newer, &newerOpen}, func() error {
		if n > 0 {
			st.ByState[journal.State(state)] = n
		}
		st.Total += n + newer
		st.Newer += newer
		st.NewerOpen += newerOpen
		st.Review += review
		if !journal.State(state).Terminal() {
			st.Open += n
		}
		return nil
	})
	if err != nil {
		return journal.Stats{}, errorf("stats: %w", readErr(ctx, err))
	}
	if err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, s.table).Scan(&st.FileSize); err != nil {
		return journal.Stats{}, errorf("stats: %w", readErr(ctx, err))
	}
	return st, nil
}
