// Package pgjournal is idem's journal in PostgreSQL: a Store that any
// number of processes share, each with its own idem.Client and Run, so
// that a replica's pending and unknown operations outlive its pod, and
// operators read the live journal.
//
// It implements idem.Store with its leases (see idem.Store): Claim and
// ClaimDue take a lease with a token one greater than the record's last
// (ClaimDue with FOR UPDATE SKIP LOCKED, so replicas never wait for one
// another's claims), and every write made under a lease carries the token
// in its WHERE clause, so a replica presumed dead never overwrites a newer
// state. Submit's new record is created with its lease in one write
// (idem.CreateClaimer). Whether a lease has ended is judged by the
// database's clock, never by a replica's: a replica whose clock runs fast
// does not take a live lease over, nor is one whose clock runs slow taken
// over early (see Store). Records are stored in the journal's own encoding
// (never a credential: the client refuses to journal one) beside the few
// columns the queries need; partial indexes keep Due, ClaimDue,
// ForEachOpen and Prune to the open or settled records they read.
//
// Concurrent writes share commits: the writes that queue while one
// transaction is under way are made together in the next, one
// PostgreSQL transaction and one WAL flush for all of them, each still
// fenced by its own lease (see Store).
//
// The schema is created by Migrate, explicitly: call it at start-up (two
// replicas may call it at once: an advisory lock serialises them).
// PrepareTx journals an operation inside the caller's own transaction
// (outbox): the business row and the intent to call the API commit or
// roll back together, and Run on any replica sends it.
//
// # The database on a bad day
//
// The journal is as durable as the database's commits, and write-ahead
// rests on it: an operation is sent only after its journal write was
// acknowledged. A server that restarts, or crashes and recovers from its
// WAL, loses nothing acknowledged: the Store's transactions commit with
// synchronous_commit on even where a DBA turned the database's default
// off for throughput (PostgreSQL then answers a COMMIT before its WAL is
// on disk, and a crash loses it). The calls made while it is down fail
// saying nothing was journaled, a write whose connection broke after its
// COMMIT was sent says it may have committed (journal.ErrMaybeCommitted:
// the client then reports the outcome unknown, and the same call made
// again with the same key finds what was journaled), and Run settles what was
// in flight once the server is back. A write or claim that meets a row
// another transaction holds locked waits at most 5 s, then fails unmade
// (see Store). A server that stops answering altogether (its host gone,
// packets dropped: no reset) holds no call for ever: each gives up after
// WithCallTimeout, as a broken connection would fail it. A failover to a
// standby that replicates asynchronously may lose commits already
// acknowledged: an operation sent, its record gone.
// Fail over only to a standby that confirmed the commits
// (synchronous_commit on, with the standby in synchronous_standby_names).
// A COMMIT cancelled while it waits for that standby's confirmation,
// which PostgreSQL then answers as made with a WARNING, reports that it
// may have committed.
// Since leases are judged by the database's clock, the standby's clock
// must agree with the primary's to well within a lease (NTP). The
// replicas' clocks need not agree for leases, nor for the result lag (a
// replica counts another's send from when it first read it), but the
// key window is judged in them (a first send one replica stamped,
// against another's now): replicas still need clocks that agree to well within
// idem.KeyWindowMargin, the time before the window's end from which idem
// stops resending (plus whatever margin their WithKeyRetention leaves
// below the server's window).
//
// # Behind a connection pooler
//
// Behind PgBouncer in transaction mode (or any pooler that hands each
// transaction to whichever server connection is free), add
// default_query_exec_mode=exec to the DSN (or, with New, set the pool's
// ConnConfig.DefaultQueryExecMode to pgx.QueryExecModeExec): pgx's
// default caches prepared statements per connection, which such a pooler
// does not keep (PgBouncer before 1.21, or without
// max_prepared_statements), and calls then fail, unmade, with an error
// that says so. The Store keeps no state in a session between its
// transactions (its lock and statement timeouts, and Migrate's lock, are
// each transaction's own), so nothing else needs setting; records are
// read in the exec mode whatever the database's bytea_output. A pooler that
// loses its connection to the server while a COMMIT is in flight says so
// in an error of its own (PgBouncer: "server conn crashed?", SQLSTATE
// 08P01), not the server's verdict: the write reports that it may have
// committed (journal.ErrMaybeCommitted), as over a broken connection.
//
// # Tools, tests and harnesses
//
// An operator tool opens the live journal with Open and reads it with
// Get, List, Stats and ForEachOpen while the replicas run. To resolve an
// operation without racing the replica that may be driving it, Claim it
// under the tool's own owner name first (journal.ErrLeased names the
// replica that holds it, and until when; TakeOver takes its lease over),
// then Resolve with a context carrying that lease (journal.WithLease):
// the replica's next write is refused and it stops. Tests get a throwaway
// server from scripts/postgres.sh (pg_start exports IDEM_PG_DSN), a schema
// of their own with WithSchema, and remove it with DropSchema.
package pgjournal

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// DefaultSchema is the schema the journal's tables live in unless
// WithSchema names another.
const DefaultSchema = "idem"

// DefaultCallTimeout is how long a call of a Store waits for the database
// unless WithCallTimeout sets another bound: six times the longest a
// healthy database makes one statement wait (a locked row, 5 s; see
// Store), far above a commit's milliseconds. A write can meet that wait
// three times over on a healthy database: queued behind a round that
// waits it out, in its own round, then alone once that round aborts. At
// three times, such a write failed (unwritten, and saying so) on a
// healthy database.
const DefaultCallTimeout = 30 * time.Second

// Errors of Open and New.
var (
	// ErrConfig means a DSN or an option is not usable; nothing was
	// opened.
	ErrConfig = errors.New("pgjournal: bad configuration")
	// ErrNotMigrated means the schema is missing or older than this build
	// needs: call Migrate.
	ErrNotMigrated = errors.New("pgjournal: schema not migrated; call Migrate")
)

// Store is a journal in PostgreSQL, safe for concurrent use by many
// goroutines and shared by many processes. Its writes (Create,
// CreateClaimed, Update, Resolve, Confirm) share commits: the writes of
// concurrent callers are made in one transaction, one WAL flush, and a
// lone write commits at once (see committer); Claim, ClaimDue, Renew and
// Release are one statement each, and PrepareTx writes inside the
// caller's transaction. A write is durable when it returns without
// error, not made when it returns an error, except one matching
// journal.ErrMaybeCommitted (the connection broke, or WithCallTimeout's
// bound ended the call, after its COMMIT was sent: it may have
// committed). Each write is a transaction whose COMMIT is sent only once
// its statements have been answered, so a call ended before then (a
// locked row, a busy pool, the rounds queued ahead) is known to have
// written nothing. A write or claim waits at most 5 s
// for a row that another transaction holds locked, whatever its context
// (PostgreSQL's lock_timeout, for its own transaction only), then fails
// unmade; and any call waits for the database at most WithCallTimeout.
//
// Leases are judged by the database's clock, so that replicas whose
// clocks disagree still agree on them: of the times a caller gives,
// Claim, ClaimDue and TakeOver take only the lease's length (expires -
// now), CreateClaimed the time from the record's Created to expires, and
// Renew how far expires moves the lease's end on; the lease then lasts
// that long as the database's clock measures it. The lease returned keeps
// the caller's expires, in the caller's clock, and a lease another owner
// holds is reported with its end in the caller's clock. (NextDue, and so
// ClaimDue's and Due's "due", stay in the callers' clocks: they schedule
// work, they fence nothing. A holder judges what is left of its own lease
// by its own clock: one stepped back while it holds a lease may overstay
// it, and another replica may then take the operation over. That makes
// no second order and no second outcome: the holder journals each submit
// before sending it, and its writes carry the lease's token, so after the
// takeover it sends no new submit and records nothing (its caller is told
// the outcome is unknown). At most, a submit it journaled before the
// takeover is still in flight while the new holder, finding that attempt
// open, queries and resends the same key and bytes: two requests for one
// key at once, which the server answers as one (409 while in flight, or
// its stored answer), as for a holder paused past its lease.)
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // Close closes the pool
	schema string
	table  string // quoted schema.records
	closed atomic.Bool
	// committer shares commits between concurrent writes.
	committer *committer
	// callerClock makes the lease statements judge by the times their
	// callers give, as the bbolt journal does, instead of the database's
	// clock: for the conformance suite, whose fixed clock jumps (see
	// export_test.go), never for replicas.
	callerClock bool
	// callTimeout bounds each call's wait for the database (bound).
	callTimeout time.Duration
	// database names the database the pool reaches (databaseID), once
	// read: nil until then.
	database atomic.Pointer[string]
	logger   *slog.Logger // WithLogger's; nil: silent
	// tracer is the pool's ConnConfig.Tracer, read once: inTx hands it
	// the COMMIT, which pgx cannot trace (see commit). nil: none.
	tracer pgx.QueryTracer
	// toldNewer holds the records written by a newer idem that
	// ForEachOpen skipped and logged, by [2]string{scope, key}: each is
	// logged once, not on every pass of Run.
	toldNewer sync.Map
}

var (
	_ idem.Store            = (*Store)(nil)
	_ idem.StatsStore       = (*Store)(nil)
	_ idem.CreateClaimer    = (*Store)(nil)
	_ idem.KeyIgnoringStore = (*Store)(nil)
)

// Option configures Open and New.
type Option interface{ apply(*config) }

type config struct {
	schema      string
	callTimeout time.Duration
	logger      *slog.Logger
	errs        []error
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// schemaName is what WithSchema accepts: a plain, unquoted PostgreSQL
// identifier, so that it means the same quoted or not.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// WithSchema sets the schema of the journal's tables (default
// DefaultSchema): lower-case letters, digits and underscores, not starting
// with a digit, at most 63 bytes. Replicas sharing a journal use the same.
func WithSchema(name string) Option {
	return optionFunc(func(c *config) {
		if !schemaName.MatchString(name) {
			c.errs = append(c.errs, fmt.Errorf("%w: schema %q: use lower-case letters, digits and _, starting with a letter, at most 63", ErrConfig, name))
			return
		}
		c.schema = name
	})
}

// WithCallTimeout sets how long each call of the Store waits for the
// database (default DefaultCallTimeout), whatever its context: a write,
// a claim, a read, Open's check that the server answers, and each
// statement of ForEachOpen and Prune (Migrate, DropSchema and PrepareTx
// answer to their context only). The client makes its journal calls
// with contexts that never end, so that a caller's cancellation never
// leaves a write half-known; without this bound a database that stops
// answering (its host gone, packets dropped: no reset, no error, nothing
// statement_timeout can end) would hold Do, Submit, Resume and Run for
// ever. A call the bound ends fails with an error matching
// context.DeadlineExceeded and names WithCallTimeout. Ended
// before its COMMIT was sent (waiting for a locked row, a connection of
// the pool, or the rounds queued ahead), a write wrote nothing, and says
// so: the client reports nothing journaled for a create, and an
// operation it already journaled stays as it was, for Resume or Run to
// settle. Ended after, the error matches journal.ErrMaybeCommitted too
// (the client then reports the outcome unknown; the operation stays
// journaled, and Resume or Run settle it once the database answers).
// pgx drops the connection rather than use it again. A bound under 10 s
// would fail calls that a healthy database makes wait for a locked row
// (see Store).
func WithCallTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: call timeout %v: give a positive duration (the default is %v)", ErrConfig, d, DefaultCallTimeout))
			return
		}
		c.callTimeout = d
	})
}

// WithLogger sets the logger that hears of the open records written by a
// newer idem (in a record version this build does not read, left by a
// rollback) that the scans of open records skip: each once, by its key.
// Without it the Store stays silent, and Stats' Newer counts them.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLogger: nil logger (leave the option out to stay silent)", ErrConfig))
			return
		}
		c.logger = l
	})
}

// Open connects to the database dsn names (a postgres:// URL or a
// key=value string, as pgx reads it) and returns a Store that owns the
// connection pool: Close closes it. The pool's size is the DSN's
// pool_max_conns (pgx's default is 4, or the CPU count if greater).
// Concurrent writes share one connection per round (see Store); reads,
// claims and renewals take one each: a few connections serve many
// callers. Open checks that the server answers, waiting at most
// WithCallTimeout, whatever ctx says; until Migrate has created the
// schema, calls fail with an error matching ErrNotMigrated.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, fmt.Errorf("%w: DSN not understood: use postgres://user@host/db or key=value pairs (%s)", ErrConfig, redact(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgjournal: open: %w", err)
	}
	s := newStore(pool, cfg)
	s.owned = true
	// Bounded as every call is: a server that accepts the connection and
	// never answers would hold Open for ever with a context that never
	// ends.
	pctx, cancel := s.bound(ctx)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		// Not waited for: pgx waits for a stalled connection to close,
		// up to 15 s more.
		go pool.Close()
		var ct callTimeout
		if errors.As(context.Cause(pctx), &ct) {
			return nil, fmt.Errorf("pgjournal: open: cannot reach the server: %w (%w)", ct, err)
		}
		return nil, fmt.Errorf("pgjournal: open: cannot reach the server: %w", err)
	}
	return s, nil
}

// redact returns a pgx parse error's text without the DSN it may quote.
func redact(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap().Error()
	}
	return "check its syntax"
}

// New returns a Store on the caller's pool, which the caller closes after
// the Store (Close leaves it open). Use it to share the pool the
// application's own transactions use (PrepareTx). The pool's
// ConnConfig.OnNotice is the application's: the Store hears the WARNING
// of a COMMIT PostgreSQL made without the synchronous standby's
// confirmation whatever it is (see commitWarning). The pool's
// ConnConfig.Tracer, a pgx QueryTracer (otelpgx's, tracelog's), sees each
// write's COMMIT as an Exec of "COMMIT", after the batch of statements
// before it; New reads it once, so a Tracer that BeforeConnect sets on a
// connection alone sees those statements but not the COMMIT.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrConfig)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newStore(pool, cfg), nil
}

func newConfig(opts []Option) (*config, error) {
	cfg := &config{schema: DefaultSchema, callTimeout: DefaultCallTimeout}
	for _, o := range opts {
		if o != nil {
			o.apply(cfg)
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	return cfg, nil
}

func newStore(pool *pgxpool.Pool, cfg *config) *Store {
	s := &Store{
		pool:        pool,
		schema:      cfg.schema,
		table:       pgx.Identifier{cfg.schema, "records"}.Sanitize(),
		callTimeout: cfg.callTimeout,
		logger:      cfg.logger,
		tracer:      pool.Config().ConnConfig.Tracer,
	}
	s.committer = newCommitter(s)
	return s
}

// Close releases the Store, and the pool if Open made it, once the writes
// under way are answered (those still queued fail with journal.ErrClosed).
// It is safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.committer.stop()
	if s.owned {
		s.pool.Close()
	}
	return nil
}

// usable reports why s cannot be used now: closed, or ctx done.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return journal.ErrClosed
	}
	return ctx.Err()
}

// bound is ctx for one call to the database: ended after the Store's call
// timeout (WithCallTimeout), if ctx has not ended first. Its cause is
// then a callTimeout, which the call's error names (see cutError).
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.callTimeout, callTimeout(s.callTimeout))
}

// callTimeout is the cause of a call's context that the Store's bound
// ended: the bound's length.
type callTimeout time.Duration

func (d callTimeout) Error() string {
	return fmt.Sprintf("no answer from the database within the call timeout (WithCallTimeout: %v)", time.Duration(d))
}

// overdue adds context.DeadlineExceeded to err, the error of a write made
// in a shared round, when ctx, the write's own bounded context, has passed
// its deadline: the round's statements end when every writer's context
// has, and pgx then reports context.Canceled, which would hide from the
// caller that the database did not answer in time.
func overdue(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
}

// Times are stored as Unix nanoseconds, the journal's precision (a
// timestamptz keeps microseconds: Due at a record's NextDue less a
// nanosecond would see it). Times outside int64's range are clamped,
// which keeps their order; the zero time is the smallest of all.
func ns(t time.Time) int64 {
	switch {
	case t.IsZero():
		return math.MinInt64
	case t.Year() < 1678:
		return math.MinInt64 + 1
	case t.Year() > 2261:
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNS(n int64) time.Time {
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// dbClock is the database's clock in Unix nanoseconds (to the
// microsecond): the start of the statement that reads it, one reading for
// all of the statement.
const dbClock = `(extract(epoch FROM statement_timestamp()) * 1000000000)::int8`

// clockSQL is the clock a lease statement judges by: the database's,
// unless its parameter $n is not NULL (see clockArg).
func clockSQL(n int) string { return fmt.Sprintf(`coalesce($%d::int8, %s)`, n, dbClock) }

// clampNS is sum, a sum of int8 expressions, computed without overflow
// and held within int8's range, as ns holds times.
func clampNS(sum string) string {
	return `least(greatest(0::numeric + ` + sum + `, -9223372036854775808), 9223372036854775807)::int8`
}

// clockArg is the parameter of clockSQL: NULL, the database's clock, or
// now on a Store of the conformance suite's (see Store.callerClock).
func (s *Store) clockArg(now time.Time) any {
	if s.callerClock {
		return ns(now)
	}
	return nil
}

// insertClock is the parameter of clockSQL in an insert of records
// created leased: NULL, the database's clock; on a Store of the
// conformance suite's, 0, from which each lease's length is its end
// (createLeased).
func (s *Store) insertClock() any {
	if s.callerClock {
		return int64(0)
	}
	return nil
}

// txSettings bounds how long the rest of its transaction waits for a
// lock another transaction holds (a row: an operator's forgotten psql
// session, an application's long transaction inserting the same key) to
// 5 s, PostgreSQL's lock_timeout for that transaction alone; the
// statement waiting then fails, and its transaction is rolled back. The
// journal's own transactions hold a row for milliseconds. Without it, a
// write made with a context that never ends, as the client makes its
// outcome writes, would wait as long as the lock is held, and every write
// queued behind its round with it.
//
// It bounds the other side too: a transaction left open by its client
// between its statements and its COMMIT (see inTx: a replica frozen by a
// pause of its process, its VM or its network) holds the rows it wrote
// locked, and other replicas could neither write nor claim them, nor take
// the replica's leases over, for as long as it stays frozen. After 5 s
// idle in it, PostgreSQL ends the session and rolls the transaction back
// (idle_in_transaction_session_timeout, for that transaction alone); the
// COMMIT the client sends later fails, and the write reports that it was
// not made, or, if pgx does not hear why, that it may have been.
//
// And it makes the transaction's COMMIT wait for its WAL to reach disk
// whatever the database's, role's or server's synchronous_commit, which
// a DBA may turn off for throughput: PostgreSQL then answers a COMMIT
// before its WAL is flushed, and a crash of the server or its host
// within three times wal_writer_delay loses it. A create so lost was
// sent all the same: an order made and no record of it for Resume or Run
// to settle; a claim so lost gives its token to the next claimant as
// well. Off becomes on (PostgreSQL's
// default); any other setting (local, remote_write, on, remote_apply)
// already flushes the WAL locally and is kept. The flush also covers
// what committed before it, so an intent PrepareTx journaled in a
// transaction that committed asynchronously is on disk once Run's claim
// of it returns, before it is sent.
const txSettings = `SELECT set_config('lock_timeout', '5s', true), set_config('idle_in_transaction_session_timeout', '5s', true),
	set_config('synchronous_commit', CASE current_setting('synchronous_commit') WHEN 'off' THEN 'on' ELSE current_setting('synchronous_commit') END, true)`

// bounded runs the statements queue adds in one transaction on a
// connection of the pool (see inTx) and returns the first error, as
// callErr classifies it for op.
func (s *Store) bounded(ctx context.Context, op string, queue func(b *pgx.Batch)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return callErr(ctx, op, err, false) // nothing sent
	}
	defer conn.Release()
	committing, err := inTx(ctx, conn.Conn(), s.tracer, queue)
	return callErr(ctx, op, err, committing)
}

// execBounded is pool.Exec, in a transaction of its own (see bounded).
func (s *Store) execBounded(ctx context.Context, op, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = s.bounded(ctx, op, func(b *pgx.Batch) {
		b.Queue(sql, args...).Exec(func(t pgconn.CommandTag) error {
			tag = t
			return nil
		})
	})
	return tag, err
}

// inTx runs the statements queue adds on conn in one transaction whose
// lock waits and durability txSettings sets: BEGIN and the statements in one
// pipelined batch, then COMMIT on its own. PostgreSQL commits the
// transaction only on that COMMIT, so a call cut before it was sent (its
// bound ended while a statement waited for a locked row) wrote nothing,
// which a batch committing at its end could not tell: the server may
// finish and commit such a batch after the client has given up on it.
// committing reports whether err came from the COMMIT (see callErr). The
// COMMIT costs a round trip of its own. tracer, the pool's QueryTracer
// (nil if none), sees the COMMIT as it would an Exec of it.
func inTx(ctx context.Context, conn *pgx.Conn, tracer pgx.QueryTracer, queue func(b *pgx.Batch)) (committing bool, err error) {
	b := &pgx.Batch{}
	// Whatever the database's or role's default_transaction_isolation:
	// the fencing (version and token in each UPDATE's WHERE clause) is
	// made for READ COMMITTED, whose UPDATE judges the row as committed
	// when it gets to it. Under REPEATABLE READ or SERIALIZABLE a row
	// another replica wrote meanwhile fails the transaction (40001)
	// instead of being read again.
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(txSettings)
	queue(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if !conn.IsClosed() {
			// A statement failed (the transaction is aborted) or a
			// callback refused a row: end the transaction, or the pool
			// drops the connection. A cut connection is closed, and the
			// server rolls back when it sees it gone.
			_, _ = conn.Exec(ctx, "ROLLBACK")
		}
		return false, err
	}
	tag, warning, sent, err := tracedCommit(ctx, conn, tracer)
	switch {
	case !sent:
		return false, err // refused unsent: the context had ended
	case err == nil && tag.String() != "COMMIT":
		return true, pgx.ErrTxCommitRollback // rolled back, not committed
	case err == nil && warning != nil:
		return true, &commitWarning{notice: warning}
	}
	return true, err
}

// commit sends COMMIT on pc, whose transaction's statements have all been
// answered, and reads the answer itself, message by message, so that it
// hears the WARNING PostgreSQL may send with a COMMIT it answers as made
// (see commitWarning) whatever the pool does with notices: pgx hands
// notices only to the pool's ConnConfig.OnNotice, which a pool given to
// New need not have. The application's OnNotice still hears them. Being
// no pgx.Conn call, it is traced by no pgx tracer: tracedCommit hands it
// to the pool's. sent reports whether the COMMIT was sent (only a
// context already ended keeps it unsent). The answer is the server's error if it sent one (a
// FATAL is followed by no ReadyForQuery, but by the connection's end);
// else a connection that broke, or a context that ended, before the
// answer's end. After an error the connection is left in its transaction
// (its last ReadyForQuery's status), so the pool drops it instead of
// using it again.
func commit(ctx context.Context, pc *pgconn.PgConn) (tag pgconn.CommandTag, warning *pgconn.Notice, sent bool, err error) {
	if err := ctx.Err(); err != nil {
		return tag, nil, false, fmt.Errorf("COMMIT not sent: %w", err)
	}
	pc.Frontend().SendQuery(&pgproto3.Query{String: "COMMIT"})
	if err := pc.Frontend().Flush(); err != nil {
		// Some of it may have reached the server.
		return tag, nil, true, fmt.Errorf("sending COMMIT: %w", err)
	}
	var pgErr error
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			var fatal *pgconn.PgError
			if pgErr == nil && errors.As(err, &fatal) {
				pgErr = fatal // a FATAL: pgx closed the connection
			}
			if pgErr != nil {
				return tag, warning, true, pgErr
			}
			return tag, warning, true, err
		}
		switch m := msg.(type) {
		case *pgproto3.CommandComplete:
			tag = pgconn.NewCommandTag(string(m.CommandTag))
		case *pgproto3.ErrorResponse:
			pgErr = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.NoticeResponse:
			if m.SeverityUnlocalized == "WARNING" || (m.SeverityUnlocalized == "" && m.Severity == "WARNING") {
				warning = (*pgconn.Notice)(pgconn.ErrorResponseToPgError((*pgproto3.ErrorResponse)(m)))
			}
		case *pgproto3.ReadyForQuery:
			return tag, warning, true, pgErr
		}
	}
}

// tracedCommit is commit on conn, shown to tracer as pgx shows an Exec
// of "COMMIT" to the conn's QueryTracer: the statement whose latency
// (the WAL flush, a synchronous standby's confirmation) a write waits on
// most, which SQL tracing (otelpgx, tracelog, the application's own)
// would otherwise miss. The COMMIT runs on ctx, not on the context
// TraceQueryStart returns: a tracer's context must not change when the
// COMMIT is cut, nor so whether the write may have committed. The trace
// ends with commit's tag and error as they are (a COMMIT answered
// ROLLBACK is no error, as with Exec).
func tracedCommit(ctx context.Context, conn *pgx.Conn, tracer pgx.QueryTracer) (tag pgconn.CommandTag, warning *pgconn.Notice, sent bool, err error) {
	if tracer == nil {
		return commit(ctx, conn.PgConn())
	}
	tctx := tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: "COMMIT"})
	tag, warning, sent, err = commit(ctx, conn.PgConn())
	tracer.TraceQueryEnd(tctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err})
	return tag, warning, sent, err
}

// queryer is what a statement runs on: the pool, or a caller's transaction.
type queryer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// callErr classifies err, the error of a write call op made with ctx, its
// bounded context (see bound): committing says whether inTx had sent the
// COMMIT. What the server answered and anything before the COMMIT did
// not commit; a connection that broke or a context that ended while the
// COMMIT was in flight may have (journal.ErrMaybeCommitted). A call its
// context ended is a cutError, which says which of the two, and why.
func callErr(ctx context.Context, op string, err error, committing bool) error {
	switch {
	case err == nil:
		return nil
	case refused(err, committing), errors.Is(err, pgx.ErrTxCommitRollback):
		return err
	}
	if ctx.Err() != nil {
		return &cutError{op: op, sent: committing, cause: context.Cause(ctx), ctxErr: ctx.Err(), err: err}
	}
	if committing {
		// A broken connection while the COMMIT was in flight: the
		// server may have committed it.
		return fmt.Errorf("%w: %w", journal.ErrMaybeCommitted, err)
	}
	return err
}

// refused reports whether err, a write's error, is the server's word
// that the write was not made: an error PostgreSQL sent (a PgError),
// except a connection exception (SQLSTATE class 08) in answer to the
// COMMIT (committing). That is not PostgreSQL's verdict on the COMMIT
// but a pooler's on its own link to the server: PgBouncer answers
// "FATAL: server conn crashed?" (08P01) when its server connection
// breaks with a query in flight (src/server.c, disconnect_server), and
// the server may have committed first. Nor is a PANIC in answer to the
// COMMIT: the server crashed (a failed WAL flush, "could not fdatasync"),
// and recovery may find the commit made.
func refused(err error, committing bool) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	if !committing {
		return true
	}
	panicked := pgErr.SeverityUnlocalized == "PANIC" || pgErr.Severity == "PANIC"
	return !panicked && !strings.HasPrefix(pgErr.Code, "08")
}

// readErr is err, the error of a read made with ctx, its bounded context
// (see bound), saying what to do when the Store's bound ended it.
func readErr(ctx context.Context, err error) error {
	var ct callTimeout
	if err == nil || !errors.As(context.Cause(ctx), &ct) {
		return err
	}
	return fmt.Errorf("%w: the read changed nothing; call again once the database answers, "+
		"or raise WithCallTimeout if the database is only slow (%w)", ct, err)
}

// A cutError is the error of a write call whose context ended (the
// Store's bound, WithCallTimeout, or the caller's context) before the
// database answered it: before its COMMIT was sent, when nothing was
// written (a wait for a locked row, for a connection of the pool, or for
// the rounds queued ahead of it took that long), or after, when the write
// may or may not have committed (it matches journal.ErrMaybeCommitted
// then). It matches the context's error (context.DeadlineExceeded) and
// pgx's.
type cutError struct {
	op     string // create, update, claim, ...
	sent   bool   // the COMMIT had been sent
	queued bool   // it ended while the write waited for the rounds ahead
	cause  error  // the context's cause: a callTimeout when the bound ended it
	ctxErr error  // the context's error
	err    error  // pgx's
}

func (e *cutError) Error() string {
	const record = "the operation stays journaled"
	var tail string
	switch {
	case !e.sent && e.op == "create":
		tail = ", before the write's COMMIT was sent: nothing was written; the operation is not journaled"
	case !e.sent && e.writesRecord():
		tail = ", before the write's COMMIT was sent: nothing was written; " + record + " as it was, " +
			"and Run settles it once the database answers"
	case !e.sent:
		tail = ", before the write's COMMIT was sent: nothing was written"
	case e.op == "create":
		tail = ", after the write's COMMIT was sent: it may or may not be committed; " +
			"make the same call again with the same key, which finds the record if it was (journal.ErrExists), and Run settles it once the database answers"
	case e.writesRecord():
		tail = ", after the write's COMMIT was sent: it may or may not be committed; " +
			record + " either way, as it was or as written, and Run settles it once the database answers"
	default:
		tail = ", after the write's COMMIT was sent: it may or may not be committed; a lease it took or extended expires by itself"
	}
	return e.what() + tail
}

// what says what ended the call, and while it waited for what.
func (e *cutError) what() string {
	var ct callTimeout
	timedOut := errors.As(e.cause, &ct)
	switch {
	case e.queued && timedOut:
		return fmt.Sprintf("the write waited for the journal's writes queued ahead of it past the call timeout (WithCallTimeout: %v)", time.Duration(ct))
	case e.queued:
		return "the call's context ended (" + e.cause.Error() + ") while the write waited for the journal's writes queued ahead of it"
	case timedOut:
		return ct.Error()
	}
	return "the call's context ended (" + e.cause.Error() + ") before the database answered"
}

// writesRecord: the call writes an operation's record, which outlives it.
func (e *cutError) writesRecord() bool {
	return e.op == "create" || e.op == "update" || e.op == "resolve" || e.op == "confirm"
}

func (e *cutError) Unwrap() []error {
	if e.sent {
		return []error{journal.ErrMaybeCommitted, e.ctxErr, e.err}
	}
	return []error{e.ctxErr, e.err}
}

// schemaErr tells a missing schema (Migrate not run), a database that
// accepts no writes and prepared statements that vanished from other
// errors, and says what to do.
func schemaErr(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case !errors.As(err, &pgErr):
	case pgErr.Code == "42P01" || pgErr.Code == "3F000":
		return fmt.Errorf("%w (%s)", ErrNotMigrated, pgErr.Message)
	case pgErr.Code == "25006":
		// A standby, or a primary demoted in a failover. The statement
		// was refused, so its transaction committed nothing.
		return fmt.Errorf("%w: the database accepts no writes (a standby, or a failover under way): nothing was written; "+
			"try again once the primary answers, and list every host in the DSN with target_session_attrs=read-write, "+
			"so that new connections reach the primary", err)
	case (pgErr.Code == "26000" || pgErr.Code == "42P05") && strings.Contains(pgErr.Message, "stmtcache_"):
		// pgx's statement cache (its default exec mode) behind a pooler
		// in transaction mode: the statements it prepared on one server
		// connection are missing on the next, or another client's are
		// there under the same name. The statement was refused, unrun.
		return fmt.Errorf("%w: the statements pgx prepared on the connection are gone or clash, as behind a pooler in transaction mode "+
			"(PgBouncer before 1.21, or without max_prepared_statements): add default_query_exec_mode=exec to the DSN, "+
			"or give New a pool whose ConnConfig.DefaultQueryExecMode is pgx.QueryExecModeExec", err)
	}
	return err
}

func errorf(format string, args ...any) error {
	for i, a := range args {
		if e, ok := a.(error); ok {
			args[i] = schemaErr(e)
		}
	}
	return fmt.Errorf("pgjournal: "+format, args...)
}

func encode(r *journal.Record) []byte { return journal.EncodeRecord(nil, r) }

// storedRecord decodes the data column as pgx hands it over undecoded: a
// scan into []byte reads bytea's text output in hex format only, and
// pgx reads results as text in the exec and simple-protocol modes (the
// modes for a pooler in transaction mode), so on a database, role or
// server whose bytea_output is escape (PostgreSQL's format before 9.0,
// kept for older applications) every read of a record failed after the
// journal's create was made: a submit sent whose outcome could never be
// written, nor settled by Run. A record's bytes start with its magic
// (0xe1 0xde): never a backslash, which starts both text formats.
func storedRecord(raw []byte) (*journal.Record, error) {
	b, err := byteaBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("data column: %w", err)
	}
	return journal.DecodeRecord(b)
}

// byteaBytes is a bytea's bytes from its binary form or either text
// output: hex (\x...) or escape (\\ for a backslash, \ooo in octal
// for a byte, the rest as is).
func byteaBytes(raw []byte) ([]byte, error) {
	switch {
	case len(raw) >= 2 && raw[0] == '\\' && raw[1] == 'x':
		out := make([]byte, hex.DecodedLen(len(raw)-2))
		_, err := hex.Decode(out, raw[2:])
		return out, err
	case len(raw) == 0 || raw[0] != '\\':
		return raw, nil // pgx's copy
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c != '\\':
			out = append(out, c)
		case i+1 < len(raw) && raw[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(raw) && isOctal(raw[i+1]) && isOctal(raw[i+2]) && isOctal(raw[i+3]) && raw[i+1] <= '3':
			out = append(out, (raw[i+1]-'0')<<6|(raw[i+2]-'0')<<3|(raw[i+3]-'0'))
			i += 3
		default:
			return nil, errors.New("bytea in escape format: a backslash neither doubled nor before three octal digits")
		}
	}
	return out, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

const recordCols = `state, open, review, created_ns, next_due_ns, settled_ns, data`

func colValues(r *journal.Record) []any {
	return []any{string(r.State), r.Open(), r.Review != "", ns(r.Created), ns(r.NextDue), ns(r.RetainFrom()), encode(r)}
}

// Create stores a new record; see idem.Store. Concurrent writes share
// commits (see Store).
func (s *Store) Create(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	stored, _, err := s.createLeased(ctx, rec, "", time.Time{})
	return stored, err
}

// CreateClaimed stores a new record leased to owner until expires, in one
// write; see idem.CreateClaimer. The lease's token is 1, as a first Claim
// of the record would take. It is given no now: the lease lasts from the
// commit for as long as from the record's Created to expires (see Store),
// and a record without Created is journal.ErrInvalid. An error matching
// journal.ErrMaybeCommitted comes with the lease the write took if it
// committed (token 1), for the caller to give up.
func (s *Store) CreateClaimed(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	if err := checkOwner(owner); err != nil {
		return nil, journal.Lease{}, errorf("create: %w", err)
	}
	return s.createLeased(ctx, rec, owner, expires)
}

// createLeased is Create, with owner's lease when owner is not empty.
func (s *Store) createLeased(ctx context.Context, rec *journal.Record, owner string, expires time.Time) (*journal.Record, journal.Lease, error) {
	if err := journal.CheckRecord(rec); err != nil {
		return nil, journal.Lease{}, errorf("create: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, journal.Lease{}, errorf("create: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	req := &request{ctx: ctx, op: "create", scope: rec.Scope, key: rec.Key, create: journal.CloneRecord(rec), owner: owner}
	switch {
	case owner == "":
	case rec.Created.IsZero():
		return nil, journal.Lease{}, errorf("create %q: the lease's length is reckoned from the record's Created, which is not set: %w", rec.Key, journal.ErrInvalid)
	case s.callerClock:
		req.leaseFor = ns(expires) // from the clock's 0 (see insertClock)
	default:
		req.leaseFor = int64(expires.Sub(rec.Created))
	}
	out, err := s.committer.do(req)
	err = overdue(ctx, err)
	if owner == "" {
		return out, journal.Lease{}, err
	}
	// A record is inserted with token 1 or not at all: the lease is known
	// even when the commit is not (see idem.CreateClaimer).
	l := journal.Lease{Scope: rec.Scope, Key: rec.Key, Owner: owner, Token: 1, Expires: leaseEnd(expires)}
	switch {
	case errors.Is(err, journal.ErrMaybeCommitted):
		return nil, l, err
	case err != nil:
		return out, journal.Lease{}, err
	}
	return out, l, nil
}

// create inserts rec with q, inside the caller's transaction (PrepareTx),
// whose commit is the caller's to judge, if q is on s's database. A
// transaction on another database holding a table of the same schema
// (the service's orders database, migrated for a Store of its own) took
// the intent there, where no Run of the Client's looks: committed with
// the order row, and never sent. The check is made by the insert's own
// statement, which inserts nothing elsewhere, so it costs no round trip.
func (s *Store) create(ctx context.Context, q queryer, rec *journal.Record) (*journal.Record, error) {
	if err := journal.CheckRecord(rec); err != nil {
		return nil, errorf("create: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, errorf("create: %w", err)
	}
	want, err := s.databaseID(ctx, false)
	if err != nil {
		return nil, errorf("create %q: which database this Store journals to: %w", rec.Key, err)
	}
	stored := journal.CloneRecord(rec)
	args := append([]any{stored.Scope, stored.Key}, colValues(stored)...)
	here, inserted, err := s.insertHere(ctx, q, want, args)
	if err == nil && here != want {
		// Read again before refusing: a database that moved (a
		// blue/green switchover) since the Store's was read. Nothing was
		// inserted, so the insert may be made again.
		if want, err = s.databaseNow(ctx, q, here); err == nil && here == want {
			here, inserted, err = s.insertHere(ctx, q, want, args)
		}
	}
	switch {
	case err != nil:
		return nil, errorf("create %q: %w", rec.Key, err)
	case here != want:
		return nil, fmt.Errorf("%w: PrepareTx: the transaction is on database %s, not on this Store's %s, whose journal the Client's Run reads: "+
			"an intent written there would never be sent; begin the transaction on the Store's database (the pool given to New)", idem.ErrInvalidRequest, here, want)
	case !inserted:
		old, err := s.get(ctx, q, rec.Scope, rec.Key)
		if err != nil {
			return nil, errorf("create %q: existing record: %w", rec.Key, err)
		}
		return old, errorf("create %q: %w", rec.Key, journal.ErrExists)
	}
	return stored, nil
}

// databaseNow reads the Store's database again, q having been found on
// here, not on the one read before. A transaction whose connection was
// made to the address of the Store's pool (the pool given to New, which
// the application's transactions share) shows where that pool reaches
// now, and here is taken without a read on the pool, which would wait
// for a connection the transactions may all hold, q's among them: on a
// pool of one, every PrepareTx after a switchover failed after
// WithCallTimeout, until the process restarted.
func (s *Store) databaseNow(ctx context.Context, q queryer, here string) (string, error) {
	if tx, ok := q.(pgx.Tx); ok && tx.Conn() != nil && sameAddress(tx.Conn().Config(), s.pool.Config().ConnConfig) {
		s.database.Store(&here)
		return here, nil
	}
	return s.databaseID(ctx, true)
}

// sameAddress reports whether a and b connect to one database by one
// address, as the same role.
func sameAddress(a, b *pgx.ConnConfig) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Database == b.Database && a.User == b.User
}

// insertHere inserts the record of args (create's) with q if q's
// database is want (databaseID's), and returns q's database and whether
// the row was inserted (not if its key was there).
func (s *Store) insertHere(ctx context.Context, q queryer, want string, args []any) (here string, inserted bool, err error) {
	err = q.QueryRow(ctx, `WITH here AS (`+databaseIDSQL+`),
		ins AS (INSERT INTO `+s.table+` (scope, key, `+recordCols+`)
			SELECT $1::text, $2::text, $3::text, $4::bool, $5::bool, $6::int8, $7::int8, $8::int8, $9::bytea FROM here WHERE here.id = $10
			ON CONFLICT (scope, key) DO NOTHING RETURNING 1)
		SELECT here.id, EXISTS (SELECT FROM ins) FROM here`, append(args, want)...).Scan(&here, &inserted)
	return here, inserted, err
}

// Get returns the record or an error matching journal.ErrNotFound.
func (s *Store) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	if err := journal.CheckID(scope, key); err != nil {
		return nil, errorf("get: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, errorf("get: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := s.get(ctx, s.pool, scope, key)
	if err != nil {
		return nil, errorf("get %q: %w", key, readErr(ctx, err))
	}
	return r, nil
}

func (s *Store) get(ctx context.Context, q queryer, scope, key string) (*journal.Record, error) {
	var data pgtype.UndecodedBytes
	err := q.QueryRow(ctx, `SELECT data FROM `+s.table+` WHERE scope = $1 AND key = $2`, scope, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, journal.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return storedRecord(data)
}

// Update applies fn to a copy of the stored record and commits it; see
// idem.Store. The write is conditional on the version read (and, under a
// lease, on its token): a concurrent writer makes it read and apply fn
// again, so fn may run more than once.
func (s *Store) Update(ctx context.Context, scope, key string, fn func(*journal.Record) error) (*journal.Record, error) {
	if fn == nil {
		return nil, errorf("update: nil function: %w", journal.ErrInvalid)
	}
	return s.write(ctx, "update", scope, key, func(r *journal.Record) error {
		if r.State.Terminal() {
			return journal.ErrTerminal
		}
		was := journal.CloneRecord(r)
		if err := fn(r); err != nil {
			return err
		}
		return journal.CheckChange(was, r)
	})
}

// Resolve settles a record by hand; see idem.Store.
func (s *Store) Resolve(ctx context.Context, scope, key string, m journal.Manual) (*journal.Record, error) {
	if err := journal.CheckManual(m); err != nil {
		return nil, errorf("resolve: %w", err)
	}
	return s.write(ctx, "resolve", scope, key, func(r *journal.Record) error {
		if err := journal.CheckResolve(r, m); err != nil {
			return err
		}
		journal.ApplyManual(r, m)
		return journal.CheckRecord(r)
	})
}

// errUnchanged, returned by a write's change, says there is nothing to
// write: write returns the record as read.
var errUnchanged = errors.New("unchanged")

// write reads the record, applies change and writes it back if nobody
// wrote it meanwhile, under ctx's lease if it carries one (fenced: change
// is not called once another owner has claimed the record). Concurrent
// writes share commits (see committer); change may run more than once,
// and on another writer's goroutine.
func (s *Store) write(ctx context.Context, op, scope, key string, change func(*journal.Record) error) (*journal.Record, error) {
	if err := journal.CheckID(scope, key); err != nil {
		return nil, errorf("%s: %w", op, err)
	}
	l, leased, err := journal.CheckLease(ctx, scope, key)
	if err != nil {
		return nil, errorf("%s %q: %w", op, key, err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, errorf("%s %q: %w", op, key, err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, err := s.committer.do(&request{ctx: ctx, op: op, scope: scope, key: key, change: change, lease: l, leased: leased})
	return out, overdue(ctx, err)
}

// Claim takes the lease on an open record; see idem.Store. The lease
// lasts expires - now as the database's clock measures it (see Store): a
// lease another owner holds is live until the database's clock passes its
// end, whatever now says, and is reported with its end in the caller's
// clock (now plus what is left of it).
func (s *Store) Claim(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	return s.claim(ctx, "claim", scope, key, owner, now, expires, false)
}

// TakeOver is Claim, except that it takes a live lease of another owner
// over too: its new token makes that owner's next write fail with
// journal.ErrLeaseLost. It is for an operator who has decided that the
// owner must stop (idem resolve -force), not for replicas, which wait for
// a lease to end.
func (s *Store) TakeOver(ctx context.Context, scope, key, owner string, now, expires time.Time) (*journal.Record, journal.Lease, error) {
	return s.claim(ctx, "take over", scope, key, owner, now, expires, true)
}

// claim is Claim, and TakeOver when force is set.
func (s *Store) claim(ctx context.Context, op, scope, key, owner string, now, expires time.Time, force bool) (*journal.Record, journal.Lease, error) {
	if err := journal.CheckID(scope, key); err != nil {
		return nil, journal.Lease{}, errorf("%s: %w", op, err)
	}
	if err := checkOwner(owner); err != nil {
		return nil, journal.Lease{}, errorf("%s: %w", op, err)
	}
	if err := checkNow(now); err != nil {
		return nil, journal.Lease{}, errorf("%s: %w", op, err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, journal.Lease{}, errorf("%s: %w", op, err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	clock := s.clockArg(now)
	var data pgtype.UndecodedBytes
	var token int64
	claimed := false
	err := s.bounded(ctx, op, func(b *pgx.Batch) {
		b.Queue(`UPDATE `+s.table+` SET lease_owner = $3, lease_expires = `+clampNS(clockSQL(5)+" + $4::int8")+`,
				lease_token = lease_token + 1
			WHERE scope = $1 AND key = $2 AND open AND (lease_owner = '' OR lease_owner = $3 OR lease_expires <= `+clockSQL(5)+` OR $6)
			RETURNING data, lease_token`, scope, key, owner, int64(expires.Sub(now)), clock, force).
			QueryRow(func(row pgx.Row) error {
				err := row.Scan(&data, &token)
				if errors.Is(err, pgx.ErrNoRows) {
					// Not claimed: said below. Not the batch's error,
					// which would make pgx prepare its statements anew.
					return nil
				}
				claimed = err == nil
				return err
			})
	})
	if err != nil {
		return nil, journal.Lease{}, errorf("%s %q: %w", op, key, err)
	}
	if claimed {
		r, err := storedRecord(data)
		if err != nil {
			return nil, journal.Lease{}, errorf("%s %q: %w", op, key, err)
		}
		return r, journal.Lease{Scope: scope, Key: key, Owner: owner, Token: uint64(token), Expires: leaseEnd(expires)}, nil
	}
	// Not claimed: missing, terminal or leased. Say which.
	var open bool
	var holder string
	var left int64 // of the holder's lease, by the database's clock
	err = s.pool.QueryRow(ctx, `SELECT data, open, lease_owner, `+clampNS("lease_expires - "+clockSQL(3))+`, lease_token FROM `+s.table+`
		WHERE scope = $1 AND key = $2`, scope, key, clock).Scan(&data, &open, &holder, &left, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, journal.Lease{}, errorf("%s %q: %w", op, key, journal.ErrNotFound)
	}
	if err != nil {
		// Not claimed: the claim's statement took no lease.
		return nil, journal.Lease{}, errorf("%s %q: %w", op, key, readErr(ctx, err))
	}
	r, err := storedRecord(data)
	if err != nil {
		return nil, journal.Lease{}, errorf("%s %q: %w", op, key, err)
	}
	if !open {
		return r, journal.Lease{}, errorf("%s %q: %w", op, key, journal.ErrTerminal)
	}
	held := journal.Lease{Scope: scope, Key: key, Owner: holder, Token: uint64(token), Expires: now.Add(time.Duration(left)).UTC()}
	return r, held, errorf("%s %q: %s holds it: %w", op, key, holder, journal.ErrLeased)
}

// leaseEnd is the expiry a lease this Store returns carries: the caller's
// own, with its monotonic clock reading, so that Renew measures the
// extension (expires − l.Expires) in the holder's monotonic clock. Read
// in its wall clock, a step forward between a claim and its renewal (NTP
// correcting a clock hours slow) lengthened the database's lease by the
// step: had the holder died then, no replica would have taken the
// operation over for hours, perhaps past the server's key window. Only
// an expiry the database cannot hold (ns clamps it) is the one it holds.
func leaseEnd(expires time.Time) time.Time {
	if held := fromNS(ns(expires)); !held.Equal(expires) {
		return held
	}
	return expires // not UTC(): that drops the monotonic reading
}

// checkNow refuses a zero now, from which a lease's length cannot be
// reckoned: read as one, it would make the lease last for ever.
func checkNow(now time.Time) error {
	if now.IsZero() {
		return fmt.Errorf("zero now: the lease's length is reckoned from it: %w", journal.ErrInvalid)
	}
	return nil
}

func checkOwner(owner string) error {
	if owner == "" {
		return fmt.Errorf("empty owner: %w", journal.ErrInvalid)
	}
	if err := journal.CheckID("owner", owner); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	return nil
}

// ClaimDue claims due records no one holds a live lease on; see
// idem.Store. Rows other claimants have locked are skipped (SKIP LOCKED),
// and so are records written by a newer idem (notNewerSQL).
func (s *Store) ClaimDue(ctx context.Context, owner string, now, expires time.Time, limit int) ([]journal.Claimed, error) {
	if err := checkOwner(owner); err != nil {
		return nil, errorf("claim due: %w", err)
	}
	if err := checkNow(now); err != nil {
		return nil, errorf("claim due: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, errorf("claim due: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	type row struct {
		c   journal.Claimed
		due int64
	}
	var got []row
	// Due by now, the caller's clock, as NextDue was written; leased by
	// the database's clock. In a transaction of its own (bounded): a
	// record it cannot decode rolls every claim back.
	err := s.bounded(ctx, "claim due", func(b *pgx.Batch) {
		b.Queue(`WITH due AS (
			SELECT scope, key FROM `+s.table+`
			WHERE open AND next_due_ns <= $1 AND (lease_owner = '' OR lease_expires <= `+clockSQL(5)+`) AND `+notNewerSQL(6)+`
			ORDER BY next_due_ns, scope, key LIMIT $2
			FOR UPDATE SKIP LOCKED)
		UPDATE `+s.table+` AS r SET lease_owner = $3, lease_expires = `+clampNS(clockSQL(5)+" + $4::int8")+`, lease_token = r.lease_token + 1
		FROM due WHERE r.scope = due.scope AND r.key = due.key
		RETURNING r.data, r.lease_token, r.next_due_ns`, ns(now), lim, owner, int64(expires.Sub(now)), s.clockArg(now), newestVersion).
			Query(func(rows pgx.Rows) error {
				var data pgtype.UndecodedBytes
				var token, due int64
				_, err := pgx.ForEachRow(rows, []any{&data, &token, &due}, func() error {
					r, err := storedRecord(data)
					if err != nil {
						return err
					}
					got = append(got, row{journal.Claimed{Record: r, Lease: journal.Lease{
						Scope: r.Scope, Key: r.Key, Owner: owner, Token: uint64(token), Expires: leaseEnd(expires),
					}}, due})
					return nil
				})
				return err
			})
	})
	if err != nil {
		return nil, errorf("claim due: %w", err)
	}
	// RETURNING keeps no order.
	slices.SortFunc(got, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.due, b.due),
			cmp.Compare(a.c.Record.Scope, b.c.Record.Scope), cmp.Compare(a.c.Record.Key, b.c.Record.Key))
	})
	out := make([]journal.Claimed, len(got))
	for i, g := range got {
		out[i] = g.c
	}
	return out, nil
}

// Renew extends a lease; see idem.Store.
func (s *Store) Renew(ctx context.Context, l journal.Lease, expires time.Time) (journal.Lease, error) {
	if err := s.usable(ctx); err != nil {
		return journal.Lease{}, errorf("renew: %w", err)
	}
	if err := journal.CheckID(l.Scope, l.Key); err != nil {
		return journal.Lease{}, errorf("renew: %w", err)
	}
	// A zero token is no claim's (the first is 1): refused unsent, as the
	// statement would match, and touch, a row no one ever claimed.
	if l.Token == 0 {
		return journal.Lease{}, errorf("renew %q: %w", l.Key, journal.ErrLeaseLost)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// Renew has no now: the lease is moved on by as much as its end in
	// the holder's clock moves on, by the database's clock (see Store).
	if l.Expires.IsZero() {
		return journal.Lease{}, errorf("renew %q: a lease without its expiry: %w", l.Key, journal.ErrInvalid)
	}
	tag, err := s.execBounded(ctx, "renew", `UPDATE `+s.table+` SET lease_expires = `+clampNS("lease_expires + $5::int8")+`
		WHERE scope = $1 AND key = $2 AND lease_token = $3 AND lease_owner = $4`,
		l.Scope, l.Key, int64(l.Token), l.Owner, int64(expires.Sub(l.Expires)))
	if err != nil {
		return journal.Lease{}, errorf("renew %q: %w", l.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return journal.Lease{}, errorf("renew %q: %w", l.Key, journal.ErrLeaseLost)
	}
	l.Expires = leaseEnd(expires)
	return l, nil
}

// Release gives a lease up; see idem.Store.
func (s *Store) Release(ctx context.Context, l journal.Lease) error {
	if err := s.usable(ctx); err != nil {
		return errorf("release: %w", err)
	}
	if err := journal.CheckID(l.Scope, l.Key); err != nil {
		return errorf("release: %w", err)
	}
	// A zero token is no claim's (the first is 1): refused unsent, as the
	// statement would match, and touch, a row no one ever claimed.
	if l.Token == 0 {
		return errorf("release %q: %w", l.Key, journal.ErrLeaseLost)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.execBounded(ctx, "release", `UPDATE `+s.table+` SET lease_owner = '', lease_expires = 0
		WHERE scope = $1 AND key = $2 AND lease_token = $3 AND lease_owner = $4`,
		l.Scope, l.Key, int64(l.Token), l.Owner)
	if err != nil {
		return errorf("release %q: %w", l.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return errorf("release %q: %w", l.Key, journal.ErrLeaseLost)
	}
	return nil
}

// PrepareTx journals req's operation inside tx, the caller's own
// transaction on this Store's database, as c.Prepare would journal it
// (see idem.Client.PrepareIn): the intent commits or rolls back with the
// caller's rows. Once tx commits, the operation is due at once, and the
// first Run of any replica sharing the journal sends it. c must journal
// to this Store's schema in this Store's database (c's Store is this
// Store, another Store on its schema and database however its pool
// reaches it, or one whose Unwrap() idem.Store method returns such a
// Store), or the call is refused with ErrInvalidRequest before any
// statement in tx: an intent journaled where c's Run never looks would
// never be sent. For a Store other than this one, the database is read
// once, on each Store's pool (an error then leaves tx untouched). tx
// must be on this Store's database too: the insert's statement inserts
// nothing on another (one whose schema of the same name holds another
// journal), and the call is refused with ErrInvalidRequest, tx left
// usable. The Store's database is compared as Migrate read it, or read
// once on the pool if this Store was not migrated; when it moved since (a
// switchover), a tx whose connection was made to the Store's pool's
// address tells where it is now. Errors are Prepare's;
// a failed statement leaves tx aborted, as any failed statement does in
// PostgreSQL.
//
// Until tx commits, the operation is invisible to every other
// transaction: Run neither waits on it nor sends it, and a Do for it
// reports ErrNotFound. req must carry a Key of the business row's (the
// order's id), or is refused (see idem.Client.PrepareIn): a COMMIT whose
// answer is lost (the connection broke) may have committed, and the
// business transaction done again must journal the same key, where it
// finds the intent, or the same key and a different request
// (ErrKeyConflict), never a second intent. A key another transaction is
// journaling makes the statement wait for that transaction; once it
// commits, under READ COMMITTED the call returns the journaled
// operation, and under REPEATABLE READ or SERIALIZABLE PostgreSQL fails
// the statement with a serialization failure (SQLSTATE 40001, a
// *pgconn.PgError in the error's chain): run the transaction again, and
// it finds the operation.
func (s *Store) PrepareTx(ctx context.Context, tx pgx.Tx, c *idem.Client, req idem.Request) (*idem.Operation, error) {
	if tx == nil || c == nil {
		return nil, fmt.Errorf("%w: PrepareTx: nil transaction or client", idem.ErrInvalidRequest)
	}
	switch ok, err := s.journalOf(ctx, c); {
	case err != nil:
		return nil, errorf("PrepareTx: which database the Client journals to: %w", err)
	case !ok:
		return nil, fmt.Errorf("%w: PrepareTx: the Client journals to %T, not to this Store's schema %q in its database, so its Run would never send the operation: give a Client made with this Store", idem.ErrInvalidRequest, c.Store(), s.schema)
	}
	return c.PrepareIn(ctx, req, func(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
		return s.create(ctx, tx, rec)
	})
}

// maxUnwrap bounds how many wrappers journalOf looks through, so that a
// Store that unwraps to itself cannot hold PrepareTx for ever.
const maxUnwrap = 16

// journalOf reports whether c journals to s's schema in s's database:
// its Store is a Store on it, or wraps one (Unwrap). Two Stores on one
// schema of one database are one journal, however their pools reach it
// (directly or through a pooler); the same schema name in another
// database (each database migrated with DefaultSchema) is another.
func (s *Store) journalOf(ctx context.Context, c *idem.Client) (bool, error) {
	st := c.Store()
	for range maxUnwrap {
		if o, ok := st.(*Store); ok {
			if o == s || o.pool == s.pool {
				return o.schema == s.schema, nil
			}
			if o.schema != s.schema {
				return false, nil
			}
			same, err := s.sameDatabase(ctx, o, false)
			if err == nil && !same {
				// Read again before refusing: a database that moved (a
				// blue/green switchover) after one of them was read.
				same, err = s.sameDatabase(ctx, o, true)
			}
			return same, err
		}
		u, ok := st.(interface{ Unwrap() idem.Store })
		if !ok {
			return false, nil
		}
		st = u.Unwrap()
	}
	return false, nil
}

// sameDatabase reports whether s's and o's pools reach one database
// (databaseID); fresh reads it again rather than what was read before.
func (s *Store) sameDatabase(ctx context.Context, o *Store, fresh bool) (bool, error) {
	mine, err := s.databaseID(ctx, fresh)
	if err != nil {
		return false, err
	}
	theirs, err := o.databaseID(ctx, fresh)
	return err == nil && mine == theirs, err
}

// databaseIDSQL reads databaseID's name of the database, as id.
const databaseIDSQL = `SELECT system_identifier::text || '/' || current_database() AS id FROM pg_control_system()`

// databaseID names the database s's pool reaches: the cluster's system
// identifier, which pg_control_system() gives any role, and the
// database's name. Host names cannot tell it: a pooler, a socket and an
// address reach one database by different names. Read on the Store's
// pool, never in a caller's transaction, and kept unless fresh.
func (s *Store) databaseID(ctx context.Context, fresh bool) (string, error) {
	if id := s.database.Load(); id != nil && !fresh {
		return *id, nil
	}
	if err := s.usable(ctx); err != nil {
		return "", err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var id string
	err := s.pool.QueryRow(ctx, databaseIDSQL).Scan(&id)
	if err != nil {
		return "", readErr(ctx, err)
	}
	s.database.Store(&id)
	return id, nil
}

// Schema returns the schema the Store's tables live in.
func (s *Store) Schema() string { return s.schema }

// NoticeHandler returns a handler that passes every notice on to next,
// and drops them when next is nil.
//
// Deprecated: a pool given to New needs no handler of the package's. The
// Store reads its COMMIT's answer itself (see commit), the WARNING
// PostgreSQL sends with a COMMIT it answers as made included, whatever
// the pool's ConnConfig.OnNotice is.
func NoticeHandler(next pgconn.NoticeHandler) pgconn.NoticeHandler {
	return func(c *pgconn.PgConn, n *pgconn.Notice) {
		if next != nil {
			next(c, n)
		}
	}
}

// A commitWarning is a COMMIT PostgreSQL answered as made, with a
// WARNING: made on this server, maybe not on the synchronous standby a
// failover would promote. A COMMIT waiting for a synchronous standby
// that is cancelled (pg_cancel_backend, a tool that cancels long
// queries) is answered as made with only a WARNING, "canceling wait for
// synchronous replication", DETAIL "The transaction has already
// committed locally, but might not have been replicated to the standby"
// (SyncRepWaitForLSN in src/backend/replication/syncrep.c): a failover
// to that standby would lose the write, so the Store reports it as
// journal.ErrMaybeCommitted, never as made. The message may be
// translated (lc_messages), so any WARNING to a COMMIT counts; the
// journal's COMMITs draw none otherwise.
type commitWarning struct{ notice *pgconn.Notice }

func (e *commitWarning) Error() string {
	msg := e.notice.Message
	if e.notice.Detail != "" {
		msg += " (" + e.notice.Detail + ")"
	}
	return "PostgreSQL answered the COMMIT as made with a WARNING: " + msg +
		": the write is committed on this server but may not be on its synchronous standby, and a failover would lose it; " +
		"check that the standby is connected and confirming (pg_stat_replication), and Run settles the operation once it is read back"
}
