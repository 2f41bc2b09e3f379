package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/cli"
	"github.com/idemkit/idem/internal/errtext"
	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/pgjournal"
)

const dsnUsage = `  -dsn DSN
        a PostgreSQL journal's database (package pgjournal), instead of
        a journal file: list, show, stats, resolve and key-ignoring work
        on the live journal while the service runs; resolve claims the
        operation's lease first (see resolve -h); a replica keeps an
        endpoint key-ignoring removes in memory until it restarts. Give
        the password in PGPASSWORD or ~/.pgpass, not in the DSN
  -schema NAME
        the PostgreSQL journal's schema (default "` + pgjournal.DefaultSchema + `")
`

// openTimeout bounds connecting to the database: an operator wants to
// hear soon that the address is wrong.
const openTimeout = 10 * time.Second

// dsnMode holds the -dsn and -schema flags.
type dsnMode struct {
	dsn    string
	schema string
	now    func() time.Time
	owner  string
}

func newDSNMode() *dsnMode {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return &dsnMode{
		schema: pgjournal.DefaultSchema,
		now:    time.Now,
		owner:  fmt.Sprintf("idem-cli@%s/%d", host, os.Getpid()),
	}
}

func (d *dsnMode) mode() cli.Mode {
	return cli.Mode{
		Name:  "-dsn",
		Usage: dsnUsage,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&d.dsn, "dsn", d.dsn, "a PostgreSQL journal's `DSN` (list, show, stats, resolve, key-ignoring on the live journal)")
			fs.StringVar(&d.schema, "schema", d.schema, "the PostgreSQL journal's `schema`")
		},
		Active: func() bool { return d.dsn != "" },
		Open:   d.open,
	}
}

func (d *dsnMode) open(ctx context.Context, cmd string) (cli.Backend, error) {
	where, password := describe(d.dsn)
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	s, err := pgjournal.Open(ctx, d.dsn, pgjournal.WithSchema(d.schema))
	if errors.Is(err, pgjournal.ErrConfig) {
		return nil, cli.UsageError(cmd, "%s", scrub(err, password))
	}
	if err != nil {
		return nil, fmt.Errorf("%s\nhint: check -dsn (%s) and that the server runs", scrub(err, password), where)
	}
	return &pgBackend{s: s, where: where, password: password, m: d}, nil
}

// describe returns the DSN without its password, and the password.
func describe(dsn string) (where, password string) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "the DSN given", ""
	}
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database}
	if strings.HasPrefix(cfg.Host, "/") {
		u.RawQuery = url.Values{"host": {cfg.Host}}.Encode()
	} else {
		u.Host = cfg.Host + ":" + strconv.Itoa(int(cfg.Port))
	}
	return u.String(), cfg.Password
}

// scrub returns err's text without password, should a driver's message
// ever quote it.
func scrub(err error, password string) string {
	msg := err.Error()
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "xxxxx")
	}
	return msg
}

// pgBackend runs the commands on a PostgreSQL journal.
type pgBackend struct {
	s        *pgjournal.Store
	where    string
	password string
	m        *dsnMode
}

// explain turns the journal's errors into advice, without the password.
func (b *pgBackend) explain(err error) error {
	if errors.Is(err, pgjournal.ErrNotMigrated) {
		return fmt.Errorf("%s\nhint: schema %q holds no idem journal: check -schema (the service's pgjournal.WithSchema); the service creates it with Migrate",
			scrub(err, b.password), b.s.Schema())
	}
	return errors.New(scrub(err, b.password))
}

func (b *pgBackend) List(ctx context.Context, f journal.Filter, _ time.Duration, _ string) ([]*journal.Record, error) {
	recs, err := b.s.List(ctx, f)
	if err != nil {
		return nil, b.explain(err)
	}
	return recs, nil
}

func (b *pgBackend) Get(ctx context.Context, scope, key string) (*journal.Record, error) {
	r, err := cli.Lookup(ctx, b.s, scope, key)
	switch {
	case errors.Is(err, cli.ErrNoOperation):
		return nil, err
	case err != nil:
		return nil, b.explain(err)
	}
	return r, nil
}

func (b *pgBackend) Stats(ctx context.Context) (journal.Stats, error) {
	st, err := b.s.Stats(ctx)
	if err != nil {
		return journal.Stats{}, b.explain(err)
	}
	return st, nil
}

func (b *pgBackend) Where() string { return b.where }

func (b *pgBackend) Heading(st journal.Stats) string {
	return fmt.Sprintf("journal %s schema %s (%s)", b.where, b.s.Schema(), cli.Size(st.FileSize))
}

func (b *pgBackend) Close() error { return b.s.Close() }

var _ cli.KeyIgnoringBackend = (*pgBackend)(nil)

// KeyIgnoringEndpoints lists the endpoints the journal keeps as ignoring
// the key (key-ignoring).
func (b *pgBackend) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	es, err := b.s.KeyIgnoringEndpoints(ctx)
	if err != nil {
		return nil, b.explainUnkept(err)
	}
	return es, nil
}

// RemoveKeyIgnoring removes endpoint from the journal, after flagging the
// operations that may have executed there (idem.RemoveKeyIgnoring): a
// replica restarted without it would resend them. The replicas that
// learnt it keep it in memory until they restart. A schema that keeps no
// endpoints yet is an error; it knows the endpoint only from an open
// operation flagged for it, and then the others that may have executed
// there are flagged all the same, which the hint counts.
func (b *pgBackend) RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, int, error) {
	known, flagged, err := idem.RemoveKeyIgnoring(ctx, b.s, endpoint)
	if errors.Is(err, idem.ErrKeyIgnoringUnkept) {
		err = b.explainUnkept(err)
		if flagged > 0 {
			err = fmt.Errorf("%w\nhint: %d open operation(s) to it that may have executed were flagged \"key ignored\" all the same (never resent): settle them (idem list -review)", err, flagged)
		}
		return false, flagged, err
	}
	if err != nil {
		return false, flagged, b.explainUnkept(err)
	}
	return known, flagged, nil
}

// explainUnkept is explain, with advice for a schema that keeps no
// endpoints yet.
func (b *pgBackend) explainUnkept(err error) error {
	// idem's errors (idem.ErrKeyIgnoringUnkept, idem.RemoveKeyIgnoring's)
	// say "idem: ", which the command prints first already.
	err = errtext.Errorf("idem: ", "%w", err)
	if errors.Is(err, idem.ErrKeyIgnoringUnkept) {
		return fmt.Errorf("%s\nhint: the service's pgjournal Migrate brings the schema to version 2, which keeps them", scrub(err, b.password))
	}
	return b.explain(err)
}

// Resolve settles the operation under a lease of the tool's own, so that
// no replica driving it writes after the resolution (see the package
// doc).
func (b *pgBackend) Resolve(ctx context.Context, scope, key string, m journal.Manual, force bool) (*journal.Record, journal.State, error) {
	l, err := b.claim(ctx, scope, key, force)
	if err != nil {
		return nil, "", err
	}
	wctx := ctx
	if l.Token != 0 {
		wctx = journal.WithLease(ctx, l)
		// The record is terminal after Resolve, or Resolve failed and a
		// replica may drive it again: either way the lease has done its
		// work. Were Release to fail, the lease would expire on its own.
		defer func() { _ = b.s.Release(context.WithoutCancel(ctx), l) }()
	}
	// Under the lease, so that no replica's drive moves it meanwhile: its
	// flag may be the endpoint's one trace, and a replica started again
	// would resend there a payment whose answer was lost.
	cur, err := b.s.Get(ctx, scope, key)
	if err == nil {
		err = idem.KeepKeyIgnoringBeforeResolve(ctx, b.s, cur)
	}
	if err != nil {
		// The command's own "idem: " comes first.
		return nil, "", b.explain(errtext.Errorf("idem: ", "%w", err))
	}
	// A webhook's Confirm takes no lease: without force, an outcome that
	// lands between the claim and this write is kept, not overwritten;
	// nor is the flag its Confirm sets on an endpoint that ignores the
	// key before settling (unleased) over a record read unflagged: it may
	// be the endpoint's one trace, journaled by the next run's read.
	m.OnlyOpen = !force
	m = m.UnlessFlaggedKeyIgnored(!journal.FlaggedKeyIgnored(cur))
	r, err := b.s.Resolve(wctx, scope, key, m)
	if errors.Is(err, journal.ErrFlaggedKeyIgnored) {
		return nil, "", fmt.Errorf("operation %q in scope %q was flagged for an endpoint that ignores the idempotency key while it was being resolved; nothing was changed: run resolve again, which journals the endpoint first", key, scope)
	}
	if errors.Is(err, journal.ErrTerminal) {
		return nil, "", fmt.Errorf("operation %q in scope %q settled while it was being resolved; nothing was changed: show it, and resolve with -force to change a settled outcome", key, scope)
	}
	if errors.Is(err, journal.ErrLeaseLost) {
		return nil, "", fmt.Errorf("operation %q in scope %q was claimed by a replica while it was being resolved; nothing was changed: run resolve again", key, scope)
	}
	if err != nil {
		return nil, "", b.explain(err)
	}
	var from journal.State
	if r.Resolved != nil {
		from = r.Resolved.From
	}
	return r, from, nil
}

// claim takes the operation's lease for the tool. A settled operation
// comes back with no lease (nobody drives it), and is refused without
// force as a journal file's is. A live lease of a replica is refused
// without force; with force it is taken over (Store.TakeOver): the new
// token fences the holder.
func (b *pgBackend) claim(ctx context.Context, scope, key string, force bool) (journal.Lease, error) {
	claim := b.s.Claim
	if force {
		claim = b.s.TakeOver
	}
	now := b.m.now()
	rec, l, err := claim(ctx, scope, key, b.m.owner, now, now.Add(idem.DefaultLeaseDuration))
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, journal.ErrNotFound):
		if _, gerr := b.Get(ctx, scope, key); gerr != nil {
			return journal.Lease{}, gerr
		}
		return journal.Lease{}, b.explain(err)
	case errors.Is(err, journal.ErrTerminal) && rec != nil:
		if !force {
			return journal.Lease{}, cli.SettledError(rec)
		}
		return journal.Lease{}, nil
	case errors.Is(err, journal.ErrLeased) && rec != nil:
		return journal.Lease{}, fmt.Errorf("operation %q in scope %q is being driven by %s, whose lease runs until %s (%s from now): it may be sending the request right now; wait until the lease ends and retry, or pass -force to take the lease over (that replica's next write is then refused)",
			key, scope, l.Owner, l.Expires.UTC().Format(time.RFC3339), l.Expires.Sub(now).Round(time.Second))
	default:
		return journal.Lease{}, b.explain(err)
	}
}
