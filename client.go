package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/internal/owned"
	"github.com/idemkit/idem/internal/recordable"
	"github.com/idemkit/idem/journal"
)

// Client sends journaled operations. Its configuration is fixed by New, and
// it is safe for concurrent use until Shutdown or Close. Two calls in one
// process for the same (scope, key) never have two requests in flight: the
// second joins the first.
type Client struct {
	cfg       config
	store     Store
	ownsStore bool
	hc        *http.Client
	budget    *retryBudget
	log       *slog.Logger
	urls      urlCache // the submit URL parsed last
	ignoring  keyIgnoring
	clocks    serverClocks // each host's clock, by its answers' Date
	// heard: the submit endpoints whose answers did not say they
	// ignore the key (heard.go).
	heard heardEndpoints
	// born is the clock's reading when the Client's first call began
	// (begin): an operation first sent before it was journaled by an
	// earlier process, by a clock that may read otherwise than this one
	// (resendBlock). Not read in New: a clock may be set up after it.
	born atomic.Pointer[bornReading]
	// steps are the wall clock's steps seen since born (wall_steps.go).
	steps wallSteps

	mu       sync.Mutex
	inflight map[opID]*call
	handover handovers  // Run's claims on calls in flight (lease.go)
	sights   sendSights // when this process met each open operation's last send (send_sights.go)
	life     lifecycle
	watch    watchers // Wait calls (hooks.go)
	// maybe: the keys whose create's commit answer was lost
	// (maybe_journaled.go).
	maybe maybeJournaled
	// resolvedAt: the time (Unix nanoseconds) of the last resolution
	// this Client wrote (resolutionTime).
	resolvedAt atomic.Int64
}

// call is one in-flight drive that later callers for the same key join.
type call struct {
	// done is closed when the call ends; made (under Client.mu) by the
	// first joiner only, as most calls have none.
	done chan struct{}
	res  *Result
	err  error
	mode driveMode
	// want: the request a Submit leader means to journal (nil for Do and
	// visits), so that a joiner can be told a conflict before the leader
	// has journaled anything.
	want *journal.Record
	// stopped: the leader's own context ended (caller gone, Shutdown
	// draining background work) before it drove the operation to an end.
	stopped bool
	// resolving: a Resolve holding the operation (holdForResolve), which
	// sends nothing; another Resolve goes on beside it.
	resolving bool
}

// New returns a Client that journals to store. Options are validated here,
// once; an invalid option is reported with what to change. One Client per
// Store: calls for the same key are coalesced within a Client, and its
// Resume and Run drive every operation in the journal with its own key
// header, request hook and decoder. New refuses a Store (one of pointer
// type, as journal's and pgjournal's are) on which another Client is open,
// with an error matching ErrInvalidRequest; once that one's Shutdown or
// Close has begun, the Store takes a new one, which drives what that one
// left open: make it with the same settings. A service calling several
// providers gives each its own journal, for good.
func New(store Store, opts ...Option) (*Client, error) {
	if store == nil {
		return nil, errors.New("idem: New: nil Store (use idem.Open to open a journal file)")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	c := newClient(store, cfg)
	if err := storeUsers.take(store, c); err != nil {
		return nil, err
	}
	return c, nil
}

// storeUsers are the open Clients by their Store, so that New refuses a
// second one: each Client's Resume and Run drive every operation in the
// journal with its own settings (key header, request hook, decoder), so a
// Client per provider on one journal sends one provider's orders with the
// other's credentials and key header (a PayPal order without its
// PayPal-Request-Id, a new order on every copy).
var storeUsers clientsByStore

type clientsByStore struct {
	mu sync.Mutex
	m  map[Store]*Client
}

// take makes c store's Client, unless another open one is.
func (u *clientsByStore) take(store Store, c *Client) error {
	if !guarded(store) {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if other := u.m[store]; other != nil && !other.closing() {
		return fmt.Errorf("%w: New: another Client is open on this Store: each Client's Resume and Run drive every operation in the journal, those Clients before it left open too, with its own key header, request hook (credentials) and decoder; use that Client (or Close it first to make it again with the same settings), or give each provider its own journal", ErrInvalidRequest)
	}
	if u.m == nil {
		u.m = make(map[Store]*Client)
	}
	u.m[store] = c
	return nil
}

// release forgets c as its Store's Client once it is closed.
func (u *clientsByStore) release(c *Client) {
	if !guarded(c.store) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[c.store] == c {
		delete(u.m, c.store)
	}
}

// guarded reports whether store is one clientsByStore keeps: only a
// pointer is sure to be comparable as a map key, and a Store of another
// kind is left unguarded.
func guarded(store Store) bool {
	return reflect.TypeOf(store).Kind() == reflect.Pointer
}

// newConfig applies and validates opts, once for New and Open alike.
func newConfig(opts []Option) (*config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		// A nil Option (one chosen by a condition, left unset) is skipped,
		// as journal.Open and idemtest.NewServer skip one.
		if o != nil {
			o.apply(cfg)
		}
	}
	if err := cfg.err(); err != nil {
		return nil, err
	}
	cfg.keyPlacement = placementOf(cfg.keyHeader, cfg.keyFormat)
	return cfg, nil
}

// newClient builds a Client from a validated configuration; it cannot fail.
func newClient(store Store, cfg *config) *Client {
	hc := defaultHTTPClient()
	if cfg.httpClient != nil {
		copied := *cfg.httpClient
		hc = &copied
	}
	// A redirected POST becomes a GET without its body; a 3xx is returned
	// as is and classified instead.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{
		cfg:      *cfg,
		store:    store,
		hc:       hc,
		budget:   newRetryBudget(cfg.retryTokens, cfg.retryRatio, cfg.clock.Now),
		log:      cfg.logger,
		inflight: make(map[opID]*call),
	}
	if ks, ok := store.(KeyIgnoringStore); ok {
		c.ignoring.save = func(e string) { c.saveIgnoring(ks, e) }
	}
	// A host's clock is kept for twice the longest key window after our
	// last send to it (serverClocks.evictClock).
	keep := cfg.longestKeyWindow()
	c.clocks.keep = addSat(keep, keep)
	c.life.init()
	return c
}

// Open opens (or creates, mode 0600) the journal file at path with fsync on
// and returns a Client that owns it: Close closes both. A journal held by
// another process fails after a bounded wait with an error matching
// journal.ErrLocked; one whose log segments are missing, with one matching
// journal.ErrLogMissing that names WithJournalOptions(journal.AcceptLostLog()).
func Open(path string, opts ...Option) (*Client, error) {
	// Options are applied once: the journal's come from the same config.
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	jopts := cfg.journalOpts
	if cfg.logger != nil {
		// First, so that a journal.WithLogger of the caller's wins.
		jopts = append([]journal.Option{journal.WithLogger(cfg.logger)}, jopts...)
	}
	store, err := journal.Open(path, jopts...)
	if errors.Is(err, journal.ErrLogMissing) {
		// The journal's message names journal.AcceptLostLog, which a
		// caller of Open can pass only through WithJournalOptions.
		return nil, fmt.Errorf("idem: %w (through idem.Open: idem.WithJournalOptions(journal.AcceptLostLog()))", err)
	}
	if err != nil {
		return nil, fmt.Errorf("idem: %w", err) // the journal's error names the path
	}
	c := newClient(store, cfg)
	c.ownsStore = true
	// A fresh journal: no other Client holds it, but New(c.Store()) may
	// try to.
	_ = storeUsers.take(store, c)
	return c, nil
}

// Store returns the Store the Client journals to: New's store, or the
// journal Open opened. A Store that journals an operation for the Client
// in a transaction of the caller's (pgjournal's PrepareTx) checks that it
// is this one, where the Client's Run looks.
func (c *Client) Store() Store {
	if c == nil {
		return nil
	}
	return c.store
}

// defaultHTTPClient has a pool sized for many concurrent callers: the
// standard two idle connections per host cost a third of the throughput.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// NewKey returns a fresh idempotency key, for callers that must know the
// key before building the body (WithKeyInBody). It is a UUIDv7: random,
// but time-ordered, so the journal's key index grows at its right edge. It
// falls back to a random UUIDv4 if a UUIDv7 cannot be made, and to the
// empty string if neither can (the system's random source failed, which
// Go 1.24 and later never report): an empty key is one Prepare and Do
// generate themselves, or refuse with WithKeyInBody, never one sent.
// Its 36 characters hold four hyphens: an order API that takes fewer,
// or letters and digits only (OKX's clOrdId, 1 to 32 of them, refused
// with sCode 51000 otherwise), takes its 32 hex digits,
// strings.ReplaceAll(NewKey(), "-", ""), given as the Request's Key.
func NewKey() string {
	k, _ := newKey()
	return k
}

// newKey returns a UUIDv7 key, a UUIDv4 one if that fails, or an error
// saying neither could be made.
func newKey() (string, error) {
	if u, err := uuid.NewV7(); err == nil {
		return u.String(), nil
	}
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("idem: cannot make an idempotency key (random source failed): %w", err)
	}
	return u.String(), nil
}

// Prepare journals the operation (fsync'd) and returns it without sending
// anything; Do sends it. Preparing the same (scope, key) again with the same
// method, URL, headers and body returns the journaled operation; with a
// different request it returns ErrKeyConflict. A credential an earlier
// release journaled in the URL or headers makes no difference: the
// request without it (the request hook adds it now), or with another
// value of it, is the same.
//
// A prepared operation is an intent that will be carried out: if nobody
// calls Do within the reconcile interval (WithReconcile), Run sends it.
// To abandon one, Resolve it as failed.
//
// An error matching ErrUnknownOutcome means the journal write failed at a
// step after which it may have taken effect (the disk failed the commit's
// last fsync): the operation may be journaled and sent later. Retry with
// the same key (the *Error's Key), never a new one. A retry whose write
// fails before reaching the journal (the database still down) is
// ErrUnknownOutcome too, in the same process: the first write may still
// have committed; so is one for a key whose earlier Do or Submit ended in
// ErrUnknownOutcome. Any other error
// (a journal error, ErrKeyConflict, ErrInvalidRequest) means nothing was
// journaled for this call and nothing will be sent for it (an earlier
// call's operation of the same key, journaled, stands: see Submit).
func (c *Client) Prepare(ctx context.Context, req Request) (*Operation, error) {
	return c.prepare(ctx, req, nil, false)
}

// prepare is Prepare with the journal write made by create (PrepareIn's,
// or the Store's Create when nil); dueNow makes the operation due at once,
// for Run, when no caller is there to call Do.
func (c *Client) prepare(ctx context.Context, req Request, create func(context.Context, *journal.Record) (*journal.Record, error), dueNow bool) (*Operation, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	rec, _, err := c.newRecord(req, false)
	if err != nil {
		if rec, _, err = c.journaledBefore(ctx, req, err); err != nil {
			return nil, err
		}
	}
	if create == nil {
		// Taken here, past enter: a method value of an unmade Client's
		// nil Store panics.
		create = c.store.Create
		// Only for the Client's own Store: PrepareIn's create gets a
		// record its caller may change, which must be checked in full.
		owned.Mark(rec)
	}
	rec.Trace = c.traceOf(ctx)
	if dueNow {
		rec.NextDue = rec.Created
	}
	stored, err := create(ctx, rec)
	switch {
	case errors.Is(err, journal.ErrExists) && stored != nil:
		c.maybe.forget(opID{rec.Scope, rec.Key})
		if !sameRequest(stored, rec) {
			return nil, c.conflict(stored)
		}
		return c.newOperation(stored), nil
	case err != nil:
		return nil, c.createErr("prepare", rec, err)
	case stored == nil:
		// A PrepareIn create that broke its contract: it may well have
		// journaled rec, so the caller must not be told nothing was.
		return nil, c.createErr("prepare", rec, fmt.Errorf("create returned neither the record nor an error: %w", journal.ErrMaybeCommitted))
	}
	c.maybe.forget(opID{rec.Scope, rec.Key})
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.LogAttrs(ctx, slog.LevelDebug, "idem: prepared", opAttrs(stored)...)
	}
	return c.newOperation(stored), nil
}

// Submit is Prepare followed by Do in one call, and cheaper: the operation
// and its first attempt are journaled in one commit. Resubmitting the same
// request with the same Key drives the journaled operation instead (it is
// never sent twice once settled). As with Prepare, an error that matches
// none of ErrUnknownOutcome, ErrFailed and ErrKeyConflict means nothing
// was journaled and nothing will be sent. An ErrUnknownOutcome whose Cause
// matches journal.ErrMaybeCommitted means nothing was sent yet and the
// journal may or may not hold the operation: retry with the same key
// until a call gets past the journal's write (one that cannot reach the
// journal says ErrUnknownOutcome again, as for Prepare). So does one for a
// key whose earlier Submit or Do ended in ErrUnknownOutcome in this
// process. Across a restart idem cannot tell: an error for a key an
// earlier call left unknown says only that this call journaled nothing;
// the earlier call's operation stands, so keep retrying that key.
func (c *Client) Submit(ctx context.Context, req Request) (*Result, error) {
	ctx, b, err := c.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer c.end(b)
	rec, first, err := c.newRecord(req, false)
	if err != nil {
		if rec, first, err = c.journaledBefore(ctx, req, err); err != nil {
			return nil, err
		}
	}
	rec.Trace = c.traceOf(ctx)
	// Before the operation is journaled: the walk's read of the journal
	// then finds nothing of this call's to apply first.
	c.ignoringLearntFirst(ctx)
	res, err := c.coalesce(ctx, rec.Scope, rec.Key, rec, foreground, func() (*Result, error) {
		// In the form the journal stores it (UTC, no monotonic reading),
		// so that the Store need not copy the attempt to convert it.
		now := c.cfg.clock.Now().UTC()
		// In the record's allocation (newRecord), of length and capacity
		// one as a literal's: an append still copies it.
		first[0] = journal.Attempt{Number: 1, Kind: journal.AttemptSubmit, Start: now}
		rec.Attempts = first[:]
		rec.FirstSent = now
		owned.Mark(rec)
		stored, lease, err := c.createClaimed(ctx, rec)
		switch {
		case errors.Is(err, journal.ErrExists):
			c.maybe.forget(opID{rec.Scope, rec.Key})
			if !sameRequest(stored, rec) {
				return nil, c.conflict(stored)
			}
			res, err := c.claimAndDrive(ctx, stored.Scope, stored.Key, nil, foreground)
			if res == nil && err != nil {
				// A claim or read that failed (cut by ctx, the database
				// gone) leaves the operation journaled all the same:
				// a plain error would say nothing was (promise 13).
				return c.finish(stored, &journalError{err})
			}
			return res, err
		case errors.Is(err, journal.ErrMaybeCommitted):
			c.releaseMaybeCreated(ctx, rec, lease, err)
			// What a later Lookup would show, if the journal holds it.
			return c.newResult(rec), c.createErr("submit", rec, err)
		case err != nil:
			err = c.createErr("submit", rec, withCause(ctx, err))
			if errors.Is(err, ErrUnknownOutcome) {
				return c.newResult(rec), err // an earlier call's create may have journaled it
			}
			return nil, err
		}
		c.maybe.forget(opID{rec.Scope, rec.Key})
		// Journaled: from here on every error is ErrUnknownOutcome.
		if lease.Token != 0 {
			// Leased with the record: its first attempt is still unsent.
			return c.drive(ctx, stored, lease, foreground, true)
		}
		return c.claimAndDrive(ctx, stored.Scope, stored.Key, stored, foreground)
	})
	c.rememberUnknown(rec.Scope, rec.Key, err)
	return res, err
}

// rememberUnknown keeps a key whose Submit or Do ended in
// ErrUnknownOutcome (its operation journaled, or maybe) among the maybe
// journaled: the caller retries it, and a retry that cannot reach the
// journal must say unknown again, never "nothing was journaled".
func (c *Client) rememberUnknown(scope, key string, err error) {
	if errors.Is(err, ErrUnknownOutcome) {
		c.maybe.add(opID{scope, key}, false)
	}
}

// Do drives a journaled operation until it settles or the call's budget is
// spent: it sends the same key and bytes on every attempt, queries the
// result endpoint when an answer is ambiguous, and waits per the backoff and
// Retry-After. An operation already succeeded or failed returns its result
// with no request sent.
//
// A server's wait an earlier call read (429 or 503 with a Retry-After)
// still holds: Do waits out what is left of it within its budget, or
// hands the operation to the reconciler at once, sending nothing.
//
// Do returns a non-nil Result for every journaled operation. The error is
// nil when it succeeded, flagged for review or not: a success with
// Result.Review set executed all the same (it may have executed twice)
// and a person looks at it; never redo it. A success a failure
// contradicts (ReviewConfirmConflict: the server's answer or an event
// said failed, about the same resource or none) is not one:
// ErrNeedsReview and ErrUnknownOutcome. See the
// package documentation's "Flagged operations". Otherwise the error
// is an *Error matching ErrFailed, ErrKeyConflict or ErrUnknownOutcome.
// On ErrUnknownOutcome the operation stays in the journal, due for Resume
// and Run, or for a person when it also matches ErrNeedsReview (a failure
// the server's answer or an event contradicts is one): do not retry it
// under a new key. A cancelled ctx never marks an operation failed.
//
// Do reads only op's Scope and Key (an empty Scope is the client's
// default, as in Lookup): what is sent is what the journal holds.
func (c *Client) Do(ctx context.Context, op *Operation) (*Result, error) {
	if op == nil {
		return nil, fmt.Errorf("%w: Do: nil *Operation (get one from Prepare or Lookup)", ErrInvalidRequest)
	}
	if op.Key == "" {
		return nil, fmt.Errorf("%w: Do: Operation without a Key (get one from Prepare or Lookup)", ErrInvalidRequest)
	}
	ctx, b, err := c.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer c.end(b)
	// Only Scope and Key are read: the journal holds the request. An
	// empty Scope is the client's default, as in Lookup.
	scope, key := c.scopeOr(op.Scope), op.Key
	res, err := c.coalesce(ctx, scope, key, nil, foreground, func() (*Result, error) {
		// Claimed (read) even if ctx is done, so the caller still learns
		// the state.
		return c.claimAndDrive(ctx, scope, key, nil, foreground)
	})
	c.rememberUnknown(scope, key, err)
	return res, err
}

// Lookup returns the journaled operation, or an error matching ErrNotFound.
// An empty scope is the client's default (WithScope), as in Request. An
// Operation with Review set is a person's to settle whatever its State: a
// failed one may have executed, and is no failure to retry under a new
// key (Do reports it as ErrNeedsReview).
func (c *Client) Lookup(ctx context.Context, scope, key string) (*Operation, error) {
	rec, err := c.Record(ctx, scope, key)
	if err != nil {
		return nil, err
	}
	return c.newOperation(rec), nil
}

// Filter selects operations for List. Each field set narrows the
// selection; the zero Filter selects every operation of the default scope.
type Filter struct {
	// Scope: only operations of this scope. Empty is the client's default
	// (WithScope), as in Request and Lookup.
	Scope string
	// AllScopes: operations of every scope; Scope must then be empty.
	AllScopes bool
	States    []State // only operations in one of these states; empty means any
	Open      bool    // only open operations: pending, processing, unknown
	Review    bool    // only operations flagged for review
	// OlderThan: only operations created more than this long ago, by the
	// client's clock; 0 means any age.
	OlderThan time.Duration
	Limit     int // at most this many, the first in (scope, key) order; 0 means no limit
	// After: only operations after this scope and key in (scope, key)
	// order, for paging: pass the Scope and Key of the last operation of
	// the previous page (the journal starts there, rather than read and
	// drop what comes before). Its Scope is taken as it is, not as the
	// client's default; the zero Position means no bound; one with a NUL
	// byte, which no scope or key holds, is refused (ErrInvalidRequest).
	After journal.Position
}

// List returns the journaled operations that match f, in (scope, key)
// order; for example every open operation flagged for review, in every
// scope: List(ctx, idem.Filter{AllScopes: true, Open: true, Review: true}).
// Filter.States selects by the journaled state alone: a failed operation
// with Review set may have executed, and is no failure to offer again
// under a new key (see the package documentation's "Flagged operations").
// An operation written by a newer idem (after a rollback) is left out:
// Stats counts those (Newer, NewerOpen).
func (c *Client) List(ctx context.Context, f Filter) ([]*Operation, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	if f.AllScopes && f.Scope != "" {
		return nil, fmt.Errorf("%w: List: Filter.AllScopes with Scope %q; set one of them", ErrInvalidRequest, f.Scope)
	}
	if f.OlderThan < 0 || f.Limit < 0 {
		return nil, fmt.Errorf("%w: List: negative Filter.OlderThan (%v) or Limit (%d)", ErrInvalidRequest, f.OlderThan, f.Limit)
	}
	for _, s := range f.States {
		if !s.Valid() {
			return nil, fmt.Errorf("%w: List: Filter.States has %q; use the State constants (StateUnknown, …)", ErrInvalidRequest, s)
		}
	}
	if strings.IndexByte(f.After.Scope, 0) >= 0 || strings.IndexByte(f.After.Key, 0) >= 0 {
		// No operation's scope or key holds one, so no page ends there:
		// the journal would refuse it as an invalid record.
		return nil, fmt.Errorf("%w: List: Filter.After has a NUL byte; pass the Scope and Key of the last operation of the previous page", ErrInvalidRequest)
	}
	jf := journal.Filter{States: f.States, Open: f.Open, Review: f.Review, Limit: f.Limit, After: f.After}
	if !f.AllScopes {
		jf.Scope = c.scopeOr(f.Scope)
	}
	if f.OlderThan > 0 {
		jf.CreatedBefore = c.cfg.clock.Now().Add(-f.OlderThan)
	}
	recs, err := c.store.List(ctx, jf)
	if err != nil {
		return nil, fmt.Errorf("idem: %w", err)
	}
	ops := make([]*Operation, len(recs))
	for i, r := range recs {
		ops[i] = c.newOperation(r)
	}
	return ops, nil
}

// Resolution is an operator's verdict on an operation automatic
// reconciliation could not settle.
type Resolution struct {
	State      State  // StateSucceeded or StateFailed
	ResourceID string // what the server created, if known
	Reason     string // required: why, for the record
	By         string // who; required
	// OnlyOpen: settle the operation only if it is still open when the
	// journal writes the resolution; one that settled meanwhile is left as
	// it is and the error matches journal.ErrTerminal. Tools that show an
	// operator an open operation and then resolve it should set it.
	OnlyOpen bool
	// Force: resolve an open operation even while it is driven (a call
	// of this process, another Resolve of it in this process, or another
	// owner's live lease on a shared journal), whose request may be on
	// the wire and may still execute;
	// its answer, if it comes, is journaled beside the resolution and
	// flags it for review when it contradicts it (ReviewConfirmConflict).
	// Another owner's lease is taken over where the Store can
	// (pgjournal's TakeOver): that owner's next write is refused. A
	// takeover cut by ctx after it fenced that owner resolves nothing
	// and that owner's late answer is not journaled: the operation stays
	// open for Run; give a forced Resolve a deadline longer than the
	// journal's call timeout.
	Force bool
}

// Resolve settles an operation by hand. It is the only way out of a
// terminal state too, and is recorded (who, why, when, previous state) and
// logged at Warn level. Nothing is sent. A request of the operation
// already on the wire when the resolution commits is not recalled: its
// answer is recorded beside the resolution as a confirmation
// (ResponseSource), and one that contradicts it flags the operation for
// review (ReviewConfirmConflict). An operation it settles from open is
// reported to WithSettleFunc too, as a Run visit's settlement is. A
// commit whose answer was lost (journal.ErrMaybeCommitted) is read back
// first: if it took effect, Resolve returns as if it had answered, hooks
// called. An empty scope is the client's default (WithScope). ResourceID
// takes at most 2048 bytes, By 255, Reason 1024.
//
// An open operation is resolved under a lease of this Client's (Store
// Claim), released after. One that is being driven, by a call of this
// process (Do, Submit, a Resume or Run visit) or by another owner's live
// lease, is refused without Force, nothing written, with an error
// matching journal.ErrLeased: its request may be on the wire, and a
// resolution "failed" the caller acts on (paying again under a new key)
// would leave two charges when it executes. Resolve again once the drive
// or lease ends (the error says until when), or with Force. A claim the
// Store holds past ctx's end (a stuck fsync, a row lock another
// transaction holds) ends with ctx, nothing written, and the key is free
// for this process's calls again.
//
// An open operation flagged ReviewKeyIgnored is settled only once the
// endpoint it was flagged for is journaled (KeyIgnoringStore), as Confirm
// does: the flag may be all that tells a restarted process the endpoint
// ignores the key, and cleared, another payment there whose answer was
// lost would be resent under the same key, a second charge. A write that
// fails writes nothing and returns the error: with the journal's
// endpoints at their bound (journal.ErrKeyIgnoringFull), make room
// (idem key-ignoring remove, ForgetKeyIgnoring) and Resolve again. One
// whose endpoint is too long ever to be journaled is settled after the
// open operations to it that may have executed are flagged
// ReviewKeyIgnored, their flags telling the next process, as they are on
// a Store that keeps no endpoints (not a KeyIgnoringStore, or
// ErrKeyIgnoringUnkept).
func (c *Client) Resolve(ctx context.Context, scope, key string, r Resolution) (*Result, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	if !r.State.Terminal() {
		return nil, fmt.Errorf("%w: Resolve: state must be %s or %s, got %q", ErrInvalidRequest, StateSucceeded, StateFailed, r.State)
	}
	if strings.TrimSpace(r.Reason) == "" || strings.TrimSpace(r.By) == "" {
		return nil, fmt.Errorf("%w: Resolve: Reason and By are required: a manual settlement must say who and why", ErrInvalidRequest)
	}
	// The bounds of a confirmation's (journal.Confirmation): every later
	// read of the operation carries what is journaled here.
	if len(r.ResourceID) > recordable.MaxResourceID || len(r.By) > recordable.MaxID || len(r.Reason) > recordable.MaxReason {
		return nil, fmt.Errorf("%w: Resolve: ResourceID takes at most %d bytes, By %d, Reason %d (got %d, %d and %d); link to longer notes",
			ErrInvalidRequest, recordable.MaxResourceID, recordable.MaxID, recordable.MaxReason, len(r.ResourceID), len(r.By), len(r.Reason))
	}
	if !recordable.Name(r.ResourceID) || !recordable.Name(r.By) || !utf8.ValidString(r.Reason) {
		return nil, fmt.Errorf("%w: Resolve: ResourceID and By must be free of control characters, and all three valid UTF-8", ErrInvalidRequest)
	}
	scope = c.scopeOr(scope)
	manual := journal.Manual{
		State: r.State, ResourceID: r.ResourceID, Reason: r.Reason, By: r.By, At: c.resolutionTime(),
		OnlyOpen: r.OnlyOpen,
	}
	wctx, done, err := c.holdForResolve(ctx, scope, key, r.Force)
	if err != nil {
		return nil, err
	}
	// Let go before the hooks and the settle func, as a Run visit's
	// settle is told outside its call: one that calls Do on the same key
	// would join this hold and wait for it for ever.
	release := sync.OnceFunc(done)
	defer release()
	var rec *journal.Record
	if rerr := unlessFlaggedSinceRead(func() (*journal.Record, error) {
		return c.keepBeforeResolve(ctx, scope, key)
	}, func(unless bool) error {
		// Written on when ctx ends, as Confirm's write is (the Store's
		// own bound, WithCallTimeout, still caps it): a write cut by the
		// caller's deadline after its COMMIT was sent reads as the Store
		// stalled (storeStalled), so no read-back would find a
		// resolution that took effect, and the settle func would never
		// be told of it.
		rec, err = c.store.Resolve(context.WithoutCancel(wctx), scope, key, manual.UnlessFlaggedKeyIgnored(unless))
		return err
	}); rerr != nil {
		return nil, rerr
	}
	if rec == nil && errors.Is(err, journal.ErrMaybeCommitted) && !storeStalled(err) {
		rec, err = c.resolvedAfterAll(ctx, scope, key, &manual, err)
	}
	if errors.Is(err, journal.ErrTerminal) {
		return nil, fmt.Errorf("idem: Resolve (scope %q, key %q): already settled, left as it is (resolve without OnlyOpen to correct a settled outcome): %w", scope, key, err)
	}
	if errors.Is(err, journal.ErrLeaseLost) {
		return nil, fmt.Errorf("idem: Resolve (scope %q, key %q): another owner claimed the operation while it was being resolved; nothing was written: resolve it again: %w", scope, key, err)
	}
	if errors.Is(err, journal.ErrFlaggedKeyIgnored) {
		// Flagged by another drive after each of the two reads: rare.
		return nil, errorf("idem: Resolve (scope %q, key %q): %s, flagged so while this call ran, so nothing was written: resolve it again: %w", scope, key, flaggedForIgnoring, err)
	}
	if err != nil {
		return nil, c.lookupErr(scope, key, err)
	}
	release()
	c.log.LogAttrs(ctx, slog.LevelWarn, "idem: resolved by hand",
		append(opAttrs(rec), slog.String("by", r.By), slog.String("reason", r.Reason))...)
	res := c.newResult(rec)
	if m := rec.Resolved; m != nil && !m.From.Terminal() && c.cfg.onSettle != nil {
		// Work the application handed off (ErrUnknownOutcome) that no
		// Run visit will settle now: the settle func is how it learns.
		// Deferred, so that a Settle hook's panic (on its way up to the
		// caller) does not skip it: the retry finds the operation settled.
		defer c.cfg.onSettle(res.clone())
	}
	c.settled(ctx, res)
	return res, nil
}

// resolvedAfterAll reads the operation again after a Resolve whose commit
// may have taken effect (err: journal.ErrMaybeCommitted). If the record
// holds m as this call made it (its At is this call's clock reading),
// Resolve goes on as if the commit had answered: the operator's retry
// finds the operation settled, so this call is the only one that can tell
// the settle hook and the settle func. Otherwise, or unread, err.
func (c *Client) resolvedAfterAll(ctx context.Context, scope, key string, m *journal.Manual, err error) (*journal.Record, error) {
	// Read on when ctx ends (the operator hung up), as Confirm does.
	wctx := context.WithoutCancel(ctx)
	cur, gerr := c.readAgain(wctx, wctx, scope, key)
	if gerr != nil {
		return nil, err
	}
	if v := cur.Resolved; v != nil && v.At.Equal(m.At) && v.By == m.By && v.Reason == m.Reason && cur.State == m.State {
		return cur, nil
	}
	return nil, err
}

// resolutionStepSlack bounds how far behind the last resolution's time a
// clock reading is still made later than it (resolutionTime).
const resolutionStepSlack = time.Second

// resolutionTime is the clock's reading for a new resolution, made later
// than the one before it if need be: resolvedAfterAll tells this call's
// resolution by its time, and two calls with the same By and Reason (an
// operator's double-submit) reading the same clock (a manual one, a
// coarse wall clock) would otherwise each take the one that committed
// for its own, and report it twice. A reading more than
// resolutionStepSlack behind the last is a wall clock put back (NTP
// correcting a step ahead): taken as it is, else every later resolution
// would carry the bad reading until restart.
func (c *Client) resolutionTime() time.Time {
	now := c.cfg.clock.Now()
	for {
		last := c.resolvedAt.Load()
		at := now
		if n := now.UnixNano(); n <= last && last-n < int64(resolutionStepSlack) {
			at = time.Unix(0, last+1).In(now.Location())
		}
		if c.resolvedAt.CompareAndSwap(last, at.UnixNano()) {
			return at
		}
	}
}

// createErr reports a failed journal write of a new operation. A plain
// error means the journal does not hold it, and never will: the caller may
// give up, or retry (reusing the key is still the safe habit). A commit
// that may have taken effect (journal.ErrMaybeCommitted: the disk failed
// its last step, the connection broke after the COMMIT was sent) is an
// *Error matching ErrUnknownOutcome: the operation may be journaled and
// Run may send it, so the caller must retry with the same key, never a
// new one. So is a plain failure of a key an earlier call's create left
// maybe journaled (maybeJournaled): this write made nothing, but the
// operation may be in the journal all the same.
func (c *Client) createErr(op string, rec *journal.Record, err error) error {
	id := opID{rec.Scope, rec.Key}
	unknown := func(cause error) error {
		return &Error{Scope: rec.Scope, Key: rec.Key, State: rec.State, Attempts: attemptCount(rec), Kind: ErrUnknownOutcome, Cause: cause}
	}
	if errors.Is(err, journal.ErrMaybeCommitted) {
		c.maybe.add(id, true)
		return unknown(fmt.Errorf("%s: retry with this key, never a new one: %w", op, err))
	}
	switch held, lostCommit := c.maybe.has(id); {
	case held && lostCommit:
		return unknown(fmt.Errorf("%s: this write made nothing, but an earlier create of this key lost its commit's answer, "+
			"so the journal may hold the operation (%w) and Run may send it: retry with this key, never a new one: %w",
			op, journal.ErrMaybeCommitted, err))
	case held:
		return unknown(fmt.Errorf("%s: this write made nothing, but an earlier call of this key ended in %w: "+
			"the journal holds the operation, and Run may send it or have sent it: retry with this key, never a new one: %w",
			op, ErrUnknownOutcome, err))
	}
	return fmt.Errorf("idem: %s (scope %q, key %q): nothing was journaled; if you retry, reuse this key: %w", op, rec.Scope, rec.Key, err)
}

// withCause adds ctx's cause to err, an error that ctx's ending caused
// (the journal refusing a write or a scan with ctx.Err()): the cause is
// ErrClosed when Close or Shutdown stopped the call, and the caller must
// be able to tell that from its own cancellation.
func withCause(ctx context.Context, err error) error {
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return err
	}
	if cause := context.Cause(ctx); !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

func (c *Client) lookupErr(scope, key string, err error) error {
	if errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("%w: scope %q, key %q", ErrNotFound, scope, key)
	}
	return fmt.Errorf("idem: %w", err)
}

// errKeyHeldByOther is the cause of a journal-side ErrKeyConflict.
// sameRequest compares headers too, so the message names them.
var errKeyHeldByOther = errors.New("the journaled request differs in method, URL, headers or body; " +
	"resend the journaled request unchanged (Lookup shows it), or use a new key for a new intent")

// journaledBefore is req's record when newRecord refused req (refused) only
// for a credential in its URL or headers and the journal already holds an
// operation under its key: one journaled by a release that still accepted
// that credential (a query parameter or header refused since); else an
// error (below).
// Such a request is driven as any resubmission is, not refused: the
// refusal's promise, nothing journaled and nothing to be sent, would be
// false, and a caller who trusted it would order again under a new key
// while Run sends the first.
//
// The record returned holds no credential, the journaled one's or the
// caller's: the journaled operation is driven as it is on disk, and
// sameRequest matches it without them. The record is journaled only if
// the operation is gone by then (Prune removed it after the Get): a
// credential the caller added on a resubmission (X-Api-Key on an order
// journaled without it) must not reach the disk that way. A request that
// is another one than the journaled, besides its credentials, is refused
// (refused) as any request carrying a credential is.
//
// When the request is not driven so, the error returned is refused as
// given, or, when the journal cannot be read, one saying it is unknown
// whether the key's operation is journaled: the refusal's promise may be
// false, so the caller is told to retry with the key (ErrUnknownOutcome),
// never to take a new one.
func (c *Client) journaledBefore(ctx context.Context, req Request, refused error) (*journal.Record, *[1]journal.Attempt, error) {
	if req.Key == "" || !errors.Is(refused, ErrSecretHeader) {
		return nil, nil, refused
	}
	rec, first, err := c.newRecord(req, true)
	if err != nil {
		return nil, nil, refused
	}
	stored, err := c.store.Get(ctx, rec.Scope, rec.Key)
	if err != nil && !errors.Is(err, journal.ErrNotFound) {
		return nil, nil, &Error{Scope: rec.Scope, Key: rec.Key, State: StateUnknown, Kind: ErrUnknownOutcome,
			Cause: fmt.Errorf("the request carries a credential idem does not journal, and the journal could not be read "+
				"to tell whether an earlier release journaled its operation: retry with this key, never a new one: %w", withCause(ctx, err))}
	}
	if err != nil || !sameRequest(stored, rec) {
		return nil, nil, refused
	}
	var okURL, okQuery bool
	rec.URL, okURL = credentialsOut(rec.URL)
	rec.QueryURL, okQuery = credentialsOut(rec.QueryURL)
	if !okURL || !okQuery {
		return nil, nil, refused
	}
	maps.DeleteFunc(rec.Header, func(name string, _ []string) bool { return httpsyntax.CredentialHeader(name) })
	return rec, first, nil
}

func (c *Client) conflict(stored *journal.Record) error {
	return keyHeldByOther(stored.Scope, stored.Key, stored.State, attemptCount(stored))
}

// keyHeldByOther is the ErrKeyConflict of a caller whose request is not
// the one journaled (or about to be) under scope and key.
func keyHeldByOther(scope, key string, state State, attempts int) error {
	return &Error{Scope: scope, Key: key, State: state, Attempts: attempts,
		Kind: ErrKeyConflict, Cause: errKeyHeldByOther, local: true}
}

// coalesce runs fn unless a call for the same key is in flight, in which
// case it waits for that call and shares its result. want, when not nil,
// is the request the caller means (Submit): a joiner whose request differs
// from the journaled one gets ErrKeyConflict, never another request's
// result. A joiner whose leader gave up without an outcome of its own (its
// context ended, or it failed before driving) drives the operation itself.
// So does a caller who waits (mode foreground or resuming) joined to the
// reconciler, which never waits and hands off what does not settle at once:
// the caller's own budget is untouched; and a caller (mode foreground)
// joined to a Resume visit that left the operation processing, which
// Resume may hand off without waiting (driver.brief), or that its host's
// clock probe refused, which Resume hands off where the caller waits its
// backoff and asks again (driver.refusedProbe).
func (c *Client) coalesce(ctx context.Context, scope, key string, want *journal.Record, mode driveMode, fn func() (*Result, error)) (*Result, error) {
	const maxJoins = 3 // then take what the last leader left
	for joins := 0; ; joins++ {
		res, cl, err := c.joinOrRun(ctx, scope, key, want, mode, fn)
		if cl == nil {
			return res, err
		}
		// A joiner whose request is not the one journaled (or about to
		// be) is told so on every path, its context's end included: never
		// another request's result or state.
		if want != nil {
			stored, gerr := c.store.Get(context.WithoutCancel(ctx), scope, key)
			switch {
			case gerr == nil && !sameRequest(stored, want):
				return nil, c.conflict(stored)
			case gerr != nil && cl.want != nil && !sameRequest(cl.want, want):
				// cl.want is the leader's record, whose attempts its
				// call may be writing right now: only what names the
				// request (never changed once built) is read of it.
				return nil, keyHeldByOther(scope, key, StatePending, 0)
			}
		}
		if ctx.Err() != nil {
			return res, err
		}
		// Whether the leader gave up is its context's business, not its
		// error's: a cause set with context.WithCancelCause (or ErrClosed,
		// when Shutdown drains Resume and Run) is neither Canceled nor
		// DeadlineExceeded, and the joiner must not inherit it.
		open := res == nil || !res.State.Terminal()
		leaderGaveUp := res == nil || (open && (cl.stopped || (mode != reconciling && cl.mode == reconciling) ||
			(mode == foreground && cl.mode == resuming && (res.State == StateProcessing || errors.Is(err, errHostRefused)))))
		if !leaderGaveUp || joins == maxJoins {
			return res, err
		}
	}
}

// errCallPanicked is what callers joined to a call that panicked learn.
var errCallPanicked = errors.New("idem: the call driving this operation panicked (a hook, decoder, classifier or transport)")

// joinOrRun runs fn as the key's leader, or waits for the leader in flight
// and returns its call (joined). Joiners always get a result: if the leader
// panics, they get the journaled state, and the panic goes on up the
// leader's stack.
func (c *Client) joinOrRun(ctx context.Context, scope, key string, want *journal.Record, mode driveMode, fn func() (*Result, error)) (res *Result, joined *call, err error) {
	id := opID{scope, key}
	c.mu.Lock()
	if cl, ok := c.inflight[id]; ok {
		if cl.done == nil {
			cl.done = make(chan struct{})
		}
		done := cl.done
		c.mu.Unlock()
		select {
		case <-done:
			return cl.res.clone(), cl, cl.err
		case <-ctx.Done():
			res, err := c.current(scope, key, context.Cause(ctx))
			return res, cl, err
		}
	}
	cl := &call{mode: mode, want: want}
	c.inflight[id] = cl
	c.mu.Unlock()

	finished := false
	defer func() {
		if !finished {
			cl.res, cl.err = c.current(scope, key, errCallPanicked)
			c.endCall(id, cl)
		}
	}()
	cl.res, cl.err = fn()
	cl.stopped = ctx.Err() != nil
	finished = true
	res = cl.res
	if c.endCall(id, cl) {
		// The joiners copy cl.res as they wake: the caller gets a copy
		// too, so that changing it cannot race with them.
		res = res.clone()
	}
	return res, nil, cl.err
}

// endCall takes the call off the in-flight set and wakes its joiners. It
// reports whether any joined.
func (c *Client) endCall(id opID, cl *call) bool {
	c.mu.Lock()
	delete(c.inflight, id)
	done := cl.done
	c.mu.Unlock()
	if done == nil {
		return false
	}
	close(done)
	return true
}

// current reports the journaled state to a caller that stopped waiting.
// Not journaled yet is not "nothing will be sent": the call in flight may
// still journal and send it, so the caller is told the outcome is unknown.
func (c *Client) current(scope, key string, cause error) (*Result, error) {
	rec, err := c.store.Get(context.Background(), scope, key)
	if errors.Is(err, journal.ErrNotFound) {
		return &Result{Scope: scope, Key: key, State: StatePending},
			&Error{Scope: scope, Key: key, State: StatePending, Kind: ErrUnknownOutcome, Cause: cause}
	}
	if err != nil {
		return nil, errors.Join(cause, c.lookupErr(scope, key, err))
	}
	return c.finish(rec, cause)
}

func (r *Result) clone() *Result {
	if r == nil {
		return nil
	}
	cp := *r
	cp.Body = bytes.Clone(r.Body)
	return &cp
}

// finish turns the journaled state into what Do returns.
func (c *Client) finish(rec *journal.Record, cause error) (*Result, error) {
	res := c.newResult(rec)
	if rec.State == StateSucceeded && !failureAgainst(rec) && !keyInUseAgainst(rec) {
		// Flagged or not, it executed: a payment made twice was made,
		// and an error would read "not charged" to a caller who takes a
		// nil error for "charged". Result.Review tells the rest. Not so
		// for a success an event confirmed while another request held
		// the key (ReviewKeyInUse): it may be that request's, and ours
		// never made; nil would ship an order perhaps unpaid.
		return res, nil
	}
	e := &Error{Scope: rec.Scope, Key: rec.Key, State: rec.State, Attempts: res.Attempts, Cause: cause, review: rec.Review != ""}
	switch {
	case rec.State.Terminal() && rec.Review != "":
		// Settled succeeded, but the server's answer or an event says it
		// failed (an operator's forced success, a decline replayed for
		// the key): nil would ship what may be unpaid, and ErrFailed
		// would invite a retry under a new key, a second charge if the
		// success was right.
		// Settled failed, but the server's own word says it may have
		// executed (ReviewConfirmConflict: its answer, or an event,
		// contradicts the settlement; ReviewMaybeTwice: an earlier copy
		// may have run; ReviewMadeTwice: another copy was made, which
		// this failure may not be about). ErrFailed would invite a retry
		// under a new key, a second charge: the outcome is open until a
		// person settles it, so it is reported as every flagged
		// operation is.
		e.Kind = ErrUnknownOutcome
		e.Cause = contradicted(rec, res.Reason, cause)
	case rec.State == StateFailed:
		e.Kind = ErrFailed
		// Read as the answer was when it settled the operation: a later
		// call for it must fail the same way.
		if res.KeyConflict {
			e.Kind = ErrKeyConflict
		}
		if e.Cause == nil {
			e.Cause = errors.New(res.Reason)
		}
	default:
		e.Kind = ErrUnknownOutcome
		if rec.Review == ReviewKeyInUse {
			e.Kind = ErrKeyConflict
		}
	}
	return res, e
}

// failureAgainst reports whether a failure contradicts rec's success: a
// confirmation, or the server's own answer, that said failed and was
// kept beside it under any review (ReviewConfirmConflict, or one that
// comes before it, such as ReviewMaybeTwice), about the resource the
// success names or about none. One naming another resource (Adyen's
// refusal of another payment under the same merchantReference) says
// nothing of this one's success, though a person looks at it all the
// same. Not once resolved: Resolve clears the review, and a person's
// word is final.
func failureAgainst(rec *journal.Record) bool {
	if rec.Review == "" {
		return false
	}
	id := ""
	if rec.Result != nil {
		id = rec.Result.ResourceID
	}
	for i := range rec.Confirmations {
		c := &rec.Confirmations[i]
		if c.Effect == journal.ConfirmConflicted && c.State == StateFailed && (id == "" || c.ResourceID == "" || c.ResourceID == id) {
			return true
		}
	}
	return false
}

// keyInUseAgainst reports whether rec's settlement may be another
// request's that used the key: flagged ReviewKeyInUse, or flagged for a
// reason that comes before it (ReviewMaybeTwice, or ReviewKeyIgnored kept
// against it) with the server's answer saying so recorded beside it
// (Confirmation.KeyInUse), or with an event settling it after a result
// query found another request's result under the key
// (journal.FoundOther): the event found it by the key, which that
// request's events carry too.
func keyInUseAgainst(rec *journal.Record) bool {
	if rec.Review == ReviewKeyInUse {
		return true
	}
	if rec.Review == "" {
		return false
	}
	byEvent := false
	for _, c := range rec.Confirmations {
		if c.KeyInUse {
			return true
		}
		byEvent = byEvent || c.Effect == journal.ConfirmSettled
	}
	return byEvent && journal.FoundOther(rec)
}

// contradicted is the cause of the error for an operation settled failed
// and flagged for review, or settled succeeded and contradicted by a
// failure (finish), wrapping the call's own cause if any.
func contradicted(rec *journal.Record, reason string, cause error) error {
	settled := string(rec.State)
	if reason != "" && reason != rec.Review {
		settled += " (" + reason + ")"
	}
	err := fmt.Errorf("%w: settled %s, but %s: a person must settle it (Resolve); never retry it under a new key",
		ErrNeedsReview, settled, rec.Review)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// scopeOr is scope, or the client's default scope when it is empty.
func (c *Client) scopeOr(scope string) string {
	if scope == "" {
		return c.cfg.scope
	}
	return scope
}

// keyRetention is the key window for rec's host.
func (c *Client) keyRetention(rec *journal.Record) time.Duration {
	if len(c.cfg.hostRetention) > 0 {
		if u, err := c.parsedURL(rec.URL); err == nil {
			// "host:port" as given first, then the host alone: a window
			// named without a port holds for every port of the host
			// (https://h:443/ and https://h/ are one server).
			for _, h := range []string{normalHost(u.Host), normalHost(u.Hostname())} {
				if d, ok := c.cfg.hostRetention[h]; ok {
					return d
				}
			}
		}
	}
	return c.cfg.keyRetention
}

// hostOf is the host rec is sent to, named as WithHostKeyRetention names
// hosts ("" if its URL does not parse).
func (c *Client) hostOf(rec *journal.Record) string {
	if u, err := c.parsedURL(rec.URL); err == nil {
		return normalHost(u.Host)
	}
	return ""
}

// queriesHost reports whether rec's result endpoint, if it has one, is on
// the host it is sent to (hostOf).
func (c *Client) queriesHost(rec *journal.Record) bool {
	if rec.QueryURL == "" {
		return true
	}
	u, err := c.parsedURL(rec.QueryURL)
	return err == nil && normalHost(u.Host) == c.hostOf(rec)
}

// parsedURL is url.Parse(s), from the cache when it holds s; read only.
func (c *Client) parsedURL(s string) (*url.URL, error) {
	if p := c.urls.lookup(s); p != nil {
		return &p.u, nil
	}
	return url.Parse(s)
}

func opAttrs(rec *journal.Record) []slog.Attr {
	attrs := []slog.Attr{slog.String("scope", rec.Scope), slog.String("key", rec.Key), slog.String("state", string(rec.State))}
	if rec.Ref != "" {
		attrs = append(attrs, slog.String("op", rec.Ref))
	}
	if rec.Result != nil && rec.Result.ResourceID != "" {
		attrs = append(attrs, slog.String("resource_id", rec.Result.ResourceID))
	}
	return attrs
}
