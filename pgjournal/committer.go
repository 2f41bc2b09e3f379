package pgjournal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/groupcommit"
	"github.com/idemkit/idem/journal"
)

// maxRound bounds one round: a leader takes at most this many requests
// and leaves the rest to the next leader. It bounds what the round's
// SELECT may read (records of up to idem.MaxBodyBytes each).
const maxRound = 64

// maxRoundBytes bounds the records one transaction writes (the first
// whatever its size): the round's other writes go in the next one.
const maxRoundBytes = 4 << 20

// maxRounds bounds the transactions of one round: a write runs again when
// another replica wrote or claimed its record since the round read it, or
// when the transaction had no room left for it (maxRoundBytes).
const maxRounds = 100

// A request is one write (Create, CreateClaimed, Update, Resolve,
// Confirm) waiting for its round.
type request struct {
	ctx context.Context
	op  string // create, update, resolve, confirm: for errors
	// scope and key name the record.
	scope, key string

	// create is the record to insert (the request's own copy); nil for a
	// change. owner, leaseFor: the lease to take with it (owner "": none)
	// and its length in nanoseconds, from the insert by the database's
	// clock (see Store.insertClock).
	create   *journal.Record
	owner    string
	leaseFor int64

	// change is applied to a copy of the stored record; the write is
	// fenced by lease when leased.
	change func(*journal.Record) error
	lease  journal.Lease
	leased bool

	// The outcome. conflict: a create that found the record (filled in
	// after the round's commit). panicked: the change panicked with it;
	// the caller panics again. Slot: the writer waits on it.
	out      *journal.Record
	conflict bool
	err      error
	panicked any
	// data is the encoded record a create inserts; rerun: the round
	// leaves the request to the next transaction.
	data  []byte
	rerun bool

	groupcommit.Slot
}

// protect calls fn, turning a panic into errPanicked and the panic value,
// so that a caller's bug fails its own request on the leader's goroutine,
// not the round.
func protect(fn func(*journal.Record) error, rec *journal.Record) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked, err = p, errPanicked
		}
	}()
	return nil, fn(rec)
}

var (
	// errPanicked stands in for the error of a request whose function
	// panicked; its caller panics again with the value.
	errPanicked = errors.New("update function panicked")
	// errGoexit fails the requests of a round whose leader was ended by
	// runtime.Goexit in a caller's function (t.FailNow in a test).
	errGoexit = errors.New("an update function called runtime.Goexit; nothing of its round was written")
)

// A committer shares commits between the concurrent writes of one Store,
// as the bbolt journal's committer does: a groupcommit.Queue (a leader,
// no timer, no goroutine of its own; a lone writer commits at once) whose
// rounds are PostgreSQL transactions.
//
// A round is one optimistic transaction (more if its records outweigh
// maxRoundBytes): one SELECT reads every record the round changes, the
// changes are applied in Go, and one pipelined batch of one INSERT (every
// create) and one UPDATE (every changed record) commits them: one WAL
// flush for the lot. Each
// changed row is written only if its version and its lease token are
// still the ones read (the fencing), so a row another replica wrote or
// claimed meanwhile is read and changed again in the next round (its
// function runs again, as Update's contract allows), and a refused or
// failing write leaves the others alone. Rows are inserted, and locked
// for their update, in (scope, key) order, so that two replicas' rounds
// never wait on one another in a cycle.
type committer struct {
	s                    *Store
	q                    groupcommit.Queue[*request]
	read, insert, update form
	lock                 string       // lockAll, on the Store's table
	rounds               atomic.Int64 // transactions attempted, for tests
	// others counts the goroutines of alone, which may outlast their
	// round.
	others sync.WaitGroup
}

func newCommitter(s *Store) *committer {
	c := &committer{s: s, read: newForm(s.table, readOne, readAll),
		insert: newInsertForm(s.table), update: newForm(s.table, updateOne, updateAll),
		lock: fmt.Sprintf(lockAll, s.table)}
	c.q = groupcommit.Queue[*request]{Max: maxRound, Commit: c.commit, Abandon: abandon, Name: "pgjournal"}
	return c
}

// do carries out r in a round and returns its outcome when it is final:
// journal.ErrClosed, without running it, once stop has been called. A
// panic of r's function is raised again here, on its caller's goroutine.
func (c *committer) do(r *request) (*journal.Record, error) {
	switch err := c.q.DoContext(r.ctx, r); {
	case errors.Is(err, groupcommit.ErrStopped):
		return nil, errorf("%s %q: %w", r.op, r.key, journal.ErrClosed)
	case err != nil:
		// Its bound ended while it waited for the rounds ahead: no round
		// took it, so nothing of it was sent.
		return nil, errorf("%s %q: %w", r.op, r.key, &cutError{op: r.op, queued: true, cause: context.Cause(r.ctx), ctxErr: err, err: err})
	}
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.out, r.err
}

// stop makes every later write fail with journal.ErrClosed and waits
// until the writes already queued, and those alone still carries out,
// are answered.
func (c *committer) stop() {
	c.q.Stop()
	c.others.Wait()
}

// abandon fails a request of a round whose leader a caller's function
// ended with runtime.Goexit (t.FailNow in a test), between two
// transactions: a request not answered yet was not written.
func abandon(r *request) {
	r.out, r.err, r.panicked = nil, errorf("%s %q: %w", r.op, r.key, errGoexit), nil
	r.Release()
}

// commit carries out the round and releases its writers: in one
// transaction, then in more for what a concurrent writer made stale, or
// one request at a time when a statement aborted the shared transaction.
func (c *committer) commit(round []*request) {
	var pending []*request
	for _, r := range round {
		if err := c.s.usable(r.ctx); err != nil {
			// Ended while queued: nothing written.
			r.err = errorf("%s %q: %w", r.op, r.key, callErr(r.ctx, r.op, err, false))
			r.Release()
			continue
		}
		pending = append(pending, r)
	}
	if len(pending) == 0 {
		return
	}
	ctx, stop := roundContext(pending)
	defer stop()
	for tries := 0; len(pending) > 0; tries++ {
		if tries == maxRounds {
			for _, r := range pending {
				r.out, r.err = nil, errorf("%s %q: %d concurrent writes in a row; try again", r.op, r.key, maxRounds)
				r.Release()
			}
			return
		}
		again, err := c.run(ctx, pending)
		if err == nil {
			pending = again
			continue
		}
		// A statement failed, which aborted the whole transaction: no
		// request of it was written. Each runs again in a transaction of
		// its own, so that the one the server refuses fails alone. A lone
		// request gets the error.
		if len(pending) == 1 {
			r := pending[0]
			r.out, r.err = nil, errorf("%s %q: %w", r.op, r.key, err)
			r.Release()
			return
		}
		c.alone(pending, round[0])
		return
	}
}

// alone carries out each of reqs in a transaction of its own, after a
// statement aborted the transaction they shared. Not one after another:
// each may wait up to the lock timeout for a row another transaction
// holds, and in a row those waits added up past a caller's bound
// (WithCallTimeout) on a healthy database, failing a write that a lock
// wait alone would not have. Writes of different records run at once;
// those of one record keep their order. It returns once lead's request
// (the leader's own, first of its round) is answered, or at once if it
// is not among reqs: the leader's caller is not held by the others' lock
// waits, which go on meanwhile (stop waits for them).
func (c *committer) alone(reqs []*request, lead *request) {
	groups := make(map[rowKey][]*request, len(reqs))
	var order []rowKey
	for _, r := range reqs {
		k := rowKey{r.scope, r.key}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var own chan struct{} // closed once lead's request is answered
	for _, k := range order {
		rs := groups[k]
		var first chan struct{}
		if rs[0] == lead { // first of the round, so first of its record's
			first = make(chan struct{})
			own = first
		}
		c.others.Add(1)
		go func() {
			n := 0
			defer func() {
				// Ended by runtime.Goexit in a caller's function (t.FailNow
				// in a test): the writes not made yet were not written.
				for _, r := range rs[n:] {
					abandon(r)
				}
				if first != nil && n == 0 {
					close(first)
				}
				c.others.Done()
			}()
			for ; n < len(rs); n++ {
				c.commit(rs[n : n+1])
				if first != nil && n == 0 {
					close(first)
				}
			}
		}()
	}
	if own != nil {
		<-own
	}
}

// roundContext is the context of a round's statements: it ends only when
// every writer's context has ended, since until then someone waits for
// the round; cut short before its COMMIT was sent, the round wrote
// nothing, and after, its fate is unknown (journal.ErrMaybeCommitted), as
// a lone write's would be. It carries the first writer's values (a
// tracer's span). A lone writer's round runs with its own context.
func roundContext(round []*request) (context.Context, func()) {
	if len(round) == 1 {
		return round[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(round[0].ctx))
	for _, r := range round {
		if r.ctx.Done() == nil {
			return ctx, cancel // this one never ends: neither does the round
		}
	}
	var left atomic.Int64
	left.Store(int64(len(round)))
	stops := make([]func() bool, len(round))
	for i, r := range round {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// A row is a stored record as the round read it and changes it.
type row struct {
	version, token int64
	rec            *journal.Record // the record with the round's changes so far
	err            error           // it could not be decoded
	dirty          bool            // changed: to be written
	data           []byte          // rec encoded, once dirty
	reqs           []*request      // the changes of it in this round, in order
}

type rowKey struct{ scope, key string }

// run carries out reqs in one transaction. It releases the requests whose
// outcome is final and returns those to run again (their record was
// written or claimed since the round read it, or the transaction had no
// room for them). An error means a statement failed and the transaction
// wrote nothing: reqs are not released.
func (c *committer) run(ctx context.Context, reqs []*request) (again []*request, err error) {
	c.rounds.Add(1)
	s := c.s
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		c.settle(reqs, err, false) // nothing sent
		return nil, nil
	}
	defer conn.Release()

	// Read every record the round changes, in one statement.
	rows := make(map[rowKey]*row)
	var creates []*request
	for _, r := range reqs {
		r.out, r.err, r.conflict, r.panicked, r.rerun = nil, nil, false, nil, false
		if r.create != nil {
			creates = append(creates, r)
		} else if rows[rowKey{r.scope, r.key}] == nil {
			rows[rowKey{r.scope, r.key}] = &row{version: -1}
		}
	}
	if len(rows) > 0 {
		if err := c.readRows(ctx, conn, rows); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				return nil, err
			}
			c.settle(reqs, err, false) // a read: nothing written
			return nil, nil
		}
	}

	// Apply the changes in order, each to what the one before left.
	for _, r := range reqs {
		if r.create != nil {
			continue
		}
		w := rows[rowKey{r.scope, r.key}]
		w.reqs = append(w.reqs, r)
		switch {
		case w.version < 0:
			r.err = journal.ErrNotFound
			continue
		case r.leased && uint64(w.token) != r.lease.Token:
			r.err = journal.ErrLeaseLost // the function is not called
			continue
		case w.err != nil:
			r.err = w.err
			continue
		}
		next := journal.CloneRecord(w.rec)
		r.panicked, r.err = protect(r.change, next)
		switch {
		case errors.Is(r.err, errUnchanged):
			r.err, r.out = nil, journal.CloneRecord(w.rec)
		case r.err == nil:
			w.rec, w.dirty, r.out = next, true, next
		}
	}

	// The first create of a key inserts it; a second finds its record.
	first := make(map[rowKey]bool, len(creates))
	var ins []*request
	for _, r := range creates {
		if k := (rowKey{r.scope, r.key}); first[k] {
			r.conflict = true
		} else {
			first[k] = true
			ins = append(ins, r)
		}
	}
	var upd []rowKey
	for k, w := range rows {
		if w.dirty {
			upd = append(upd, k)
		}
	}
	ins, upd, again = c.budget(ins, upd, rows, creates)
	if len(ins)+len(upd) > 0 {
		inserted, updated, committing, err := c.writeRows(ctx, conn, ins, upd, rows)
		if err != nil {
			if refused(err, committing) {
				return nil, err // rolled back: nothing written
			}
			// Written only if the COMMIT was sent (committing), and then
			// maybe. What was left to the next transaction was not sent.
			var sent []*request
			for _, r := range reqs {
				if !r.rerun {
					sent = append(sent, r)
				}
			}
			c.settle(sent, err, committing)
			return again, nil
		}
		for _, r := range ins {
			r.conflict = !inserted[rowKey{r.scope, r.key}]
		}
		for _, k := range upd {
			if !updated[k] {
				// Written or claimed since the read: every change of it
				// in this round saw a stale record. Run them again.
				again = rerun(again, rows[k].reqs...)
			}
		}
	}

	// The round is committed. A create that found its record returns the
	// record that won, read after the commit (in one statement for all),
	// as a lone Create reads it.
	won := make(map[rowKey]*row)
	for _, r := range creates {
		if r.conflict {
			won[rowKey{r.scope, r.key}] = &row{version: -1}
		}
	}
	var wonErr error
	if len(won) > 0 {
		wonErr = c.readRows(ctx, conn, won)
	}
	// Answer what is final.
	for _, r := range reqs {
		if r.rerun {
			continue
		}
		switch w := won[rowKey{r.scope, r.key}]; {
		case r.create == nil:
		case !r.conflict:
			r.out = r.create
		case wonErr != nil:
			r.err = fmt.Errorf("existing record: %w", wonErr)
		case w.version < 0:
			r.err = fmt.Errorf("existing record: %w", journal.ErrNotFound) // pruned since
		case w.err != nil:
			r.err = fmt.Errorf("existing record: %w", w.err)
		default:
			// Each caller its own copy.
			r.out, r.err = journal.CloneRecord(w.rec), journal.ErrExists
		}
		if r.err != nil {
			r.err = errorf("%s %q: %w", r.op, r.key, r.err)
		}
		r.Release()
	}
	return again, nil
}

// budget keeps the creates and changed rows of one transaction to
// maxRoundBytes of encoded records (the first whatever its size), which
// it encodes, and returns the requests of the rest, left to the next
// transaction: a create, with any other create of its key, or every
// change of a row.
func (c *committer) budget(ins []*request, upd []rowKey, rows map[rowKey]*row, creates []*request) (keptIns []*request, keptUpd []rowKey, later []*request) {
	size := 0
	fits := func(data []byte) bool {
		if size > 0 && size+len(data) > maxRoundBytes {
			return false
		}
		size += len(data)
		return true
	}
	left := make(map[rowKey]bool)
	for _, r := range ins {
		r.data = encode(r.create)
		if fits(r.data) {
			keptIns = append(keptIns, r)
		} else {
			left[rowKey{r.scope, r.key}] = true
		}
	}
	for _, r := range creates {
		if left[rowKey{r.scope, r.key}] {
			later = rerun(later, r)
		}
	}
	for _, k := range upd {
		w := rows[k]
		w.data = encode(w.rec)
		if fits(w.data) {
			keptUpd = append(keptUpd, k)
		} else {
			later = rerun(later, w.reqs...)
		}
	}
	return keptIns, keptUpd, later
}

// rerun adds reqs to again, marked to run in the next transaction.
func rerun(again []*request, reqs ...*request) []*request {
	for _, r := range reqs {
		r.rerun = true
	}
	return append(again, reqs...)
}

// settle fails every request of a round with err, as callErr classifies
// it for each (committing: the round's COMMIT had been sent): nothing was
// written, or (journal.ErrMaybeCommitted) nobody can tell, and then no
// request may report an outcome, not even one computed on the round's
// read, since it may stand on another request's write. Each request's
// own context says whether its bound ended it: the round's ends only
// once every writer's has.
func (c *committer) settle(reqs []*request, err error, committing bool) {
	for _, r := range reqs {
		r.out, r.err, r.panicked = nil, errorf("%s %q: %w", r.op, r.key, callErr(r.ctx, r.op, err, committing)), nil
		r.Release()
	}
}

// The round's statements, for one row and for several. One row is the
// lone writer's round, the commonest: the plain form costs PostgreSQL
// less CPU than the unnest form for one row (measured: about half for
// the SELECT and the UPDATE).
const (
	readOne = `SELECT scope, key, data, version, lease_token FROM %[1]s WHERE scope = $1 AND key = $2`
	readAll = `SELECT r.scope, r.key, r.data, r.version, r.lease_token FROM %[1]s AS r
		JOIN unnest($1::text[], $2::text[]) AS u(scope, key) ON r.scope = u.scope COLLATE "C" AND r.key = u.key COLLATE "C"`

	// A lease taken with the record ends leaseFor after the insert by the
	// database's clock ($13, see Store.insertClock).
	insertCols = `(scope, key, ` + recordCols + `, lease_owner, lease_expires, lease_token)`
	insertOne  = `INSERT INTO %[1]s ` + insertCols + ` VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
			CASE WHEN $10 = '' THEN 0 ELSE %[2]s END, $12)
		ON CONFLICT (scope, key) DO NOTHING RETURNING scope, key`
	insertAll = `INSERT INTO %[1]s ` + insertCols + `
		SELECT u.scope, u.key, u.state, u.open, u.review, u.created_ns, u.next_due_ns, u.settled_ns, u.data, u.owner,
			CASE WHEN u.owner = '' THEN 0 ELSE %[2]s END, u.token
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::bool[], $6::int8[], $7::int8[], $8::int8[],
			$9::bytea[], $10::text[], $11::int8[], $12::int8[])
			AS u(scope, key, state, open, review, created_ns, next_due_ns, settled_ns, data, owner, lease_for, token)
		ON CONFLICT (scope, key) DO NOTHING RETURNING scope, key`

	// lockAll takes the rows a round of several updates is about to
	// write, in (scope, key) order: ORDER BY sorts before FOR UPDATE
	// locks (the SELECT reference's locking clause), whereas updateAll
	// locks rows in whatever order its join meets them (the heap's, which
	// each update reorders), so that two replicas' rounds, or a round and
	// a claim queued behind one of them, waited on one another in a cycle
	// and PostgreSQL failed one as a deadlock (40P01). updateAll then
	// finds every row already its own.
	lockAll = `SELECT 1 FROM %[1]s AS r
		JOIN unnest($1::text[], $2::text[]) AS u(scope, key) ON r.scope = u.scope COLLATE "C" AND r.key = u.key COLLATE "C"
		ORDER BY r.scope COLLATE "C", r.key COLLATE "C" FOR UPDATE OF r`

	// The token is in the WHERE clause: a claim since the read fences the
	// write, whatever the version says.
	updateOne = `UPDATE %[1]s SET (` + recordCols + `) = ($5, $6, $7, $8, $9, $10, $11), version = version + 1
		WHERE scope = $1 AND key = $2 AND version = $3 AND lease_token = $4 RETURNING scope, key`
	updateAll = `UPDATE %[1]s AS r SET (` + recordCols + `) =
			(u.state, u.open, u.review, u.created_ns, u.next_due_ns, u.settled_ns, u.data), version = r.version + 1
		FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[], $6::bool[], $7::bool[], $8::int8[],
			$9::int8[], $10::int8[], $11::bytea[])
			AS u(scope, key, version, token, state, open, review, created_ns, next_due_ns, settled_ns, data)
		WHERE r.scope = u.scope COLLATE "C" AND r.key = u.key COLLATE "C" AND r.version = u.version AND r.lease_token = u.token
		RETURNING r.scope, r.key`
)

// A form is a statement of the round on the Store's table, for one row
// and for several.
type form struct{ one, all string }

func newForm(table, one, all string) form {
	return form{fmt.Sprintf(one, table), fmt.Sprintf(all, table)}
}

// newInsertForm is the inserts' form: the end of the lease a row takes is
// the second argument of their formats.
func newInsertForm(table string) form {
	return form{fmt.Sprintf(insertOne, table, clampNS(clockSQL(13)+" + $11::int8")),
		fmt.Sprintf(insertAll, table, clampNS(clockSQL(13)+" + u.lease_for"))}
}

// args returns the form for the rows of cols (one slice per column) and
// its arguments: the slices, or for one row their only elements.
func (f form) args(cols ...any) (string, []any) {
	if reflect.ValueOf(cols[0]).Len() != 1 {
		return f.all, cols
	}
	args := make([]any, len(cols))
	for i, c := range cols {
		args[i] = reflect.ValueOf(c).Index(0).Interface()
	}
	return f.one, args
}

// readRows reads the version, lease token and record of every row in
// rows, which it fills in; a missing record keeps version -1.
func (c *committer) readRows(ctx context.Context, q queryer, rows map[rowKey]*row) error {
	scopes, keys := make([]string, 0, len(rows)), make([]string, 0, len(rows))
	for k := range rows {
		scopes, keys = append(scopes, k.scope), append(keys, k.key)
	}
	sql, args := c.read.args(scopes, keys)
	rs, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	var k rowKey
	var data pgtype.UndecodedBytes
	var version, token int64
	_, err = pgx.ForEachRow(rs, []any{&k.scope, &k.key, &data, &version, &token}, func() error {
		w := rows[k]
		if w == nil {
			return fmt.Errorf("read a record not asked for: %q", k.key)
		}
		w.version, w.token = version, token
		w.rec, w.err = storedRecord(data)
		return nil
	})
	return err
}

// writeRows inserts the creates and updates the changed rows in one
// transaction (inTx: one pipelined batch, then its COMMIT), and returns
// which rows it inserted and which it updated (an update is made only if
// the row's version and token are the ones read). Both statements take
// rows in (scope, key) order. An error the server refused the write
// with (refused) means nothing was written; any other error, that
// nothing was written unless committing (the COMMIT was sent), and then
// that it may have been.
func (c *committer) writeRows(ctx context.Context, conn *pgxpool.Conn, ins []*request, upd []rowKey, rows map[rowKey]*row) (inserted, updated map[rowKey]bool, committing bool, err error) {
	inserted, updated = make(map[rowKey]bool, len(ins)), make(map[rowKey]bool, len(upd))
	committing, err = inTx(ctx, conn.Conn(), c.s.tracer, func(b *pgx.Batch) { c.queueWrites(b, ins, upd, rows, inserted, updated) })
	return inserted, updated, committing, err
}

// queueWrites adds writeRows' statements to b; their rows fill in inserted
// and updated.
func (c *committer) queueWrites(b *pgx.Batch, ins []*request, upd []rowKey, rows map[rowKey]*row, inserted, updated map[rowKey]bool) {
	scan := func(into map[rowKey]bool) func(pgx.Rows) error {
		return func(rs pgx.Rows) error {
			var k rowKey
			_, err := pgx.ForEachRow(rs, []any{&k.scope, &k.key}, func() error {
				into[k] = true
				return nil
			})
			return err
		}
	}
	if len(ins) > 0 {
		ins = slices.SortedFunc(slices.Values(ins), func(a, b *request) int {
			return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.key, b.key))
		})
		n := len(ins)
		scopes, keys, states := make([]string, n), make([]string, n), make([]string, n)
		open, review := make([]bool, n), make([]bool, n)
		created, due, settled := make([]int64, n), make([]int64, n), make([]int64, n)
		data := make([][]byte, n)
		owners, leaseFor, tokens := make([]string, n), make([]int64, n), make([]int64, n)
		for i, r := range ins {
			rec := r.create
			scopes[i], keys[i], states[i] = rec.Scope, rec.Key, string(rec.State)
			open[i], review[i] = rec.Open(), rec.Review != ""
			created[i], due[i], settled[i] = ns(rec.Created), ns(rec.NextDue), ns(rec.RetainFrom())
			data[i] = r.data
			if r.owner != "" {
				owners[i], leaseFor[i], tokens[i] = r.owner, r.leaseFor, 1
			}
		}
		sql, args := c.insert.args(scopes, keys, states, open, review, created, due, settled, data, owners, leaseFor, tokens)
		b.Queue(sql, append(args, c.s.insertClock())...).Query(scan(inserted))
	}
	if len(upd) > 0 {
		slices.SortFunc(upd, func(a, b rowKey) int { return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.key, b.key)) })
		n := len(upd)
		scopes, keys, states := make([]string, n), make([]string, n), make([]string, n)
		versions, tokens := make([]int64, n), make([]int64, n)
		open, review := make([]bool, n), make([]bool, n)
		created, due, settled := make([]int64, n), make([]int64, n), make([]int64, n)
		data := make([][]byte, n)
		for i, k := range upd {
			w := rows[k]
			rec := w.rec
			scopes[i], keys[i], versions[i], tokens[i] = k.scope, k.key, w.version, w.token
			states[i], open[i], review[i] = string(rec.State), rec.Open(), rec.Review != ""
			created[i], due[i], settled[i] = ns(rec.Created), ns(rec.NextDue), ns(rec.RetainFrom())
			data[i] = w.data
		}
		if n > 1 {
			b.Queue(c.lock, scopes, keys)
		}
		sql, args := c.update.args(scopes, keys, versions, tokens, states, open, review, created, due, settled, data)
		b.Queue(sql, args...).Query(scan(updated))
	}
}
