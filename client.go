package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/idemkit/idem/journal"
)

// Client sends journaled operations. It is immutable after New and safe for
// concurrent use. Two calls in one process for the same (scope, key) never
// have two requests in flight: the second joins the first.
type Client struct {
	cfg       config
	store     Store
	ownsStore bool
	hc        *http.Client
	budget    *retryBudget
	log       *slog.Logger

	mu       sync.Mutex
	inflight map[string]*call
	closed   atomic.Bool
}

// call is one in-flight drive that later callers for the same key join.
type call struct {
	done chan struct{}
	res  *Result
	err  error
}

// New returns a Client that journals to store. Options are validated here,
// once; an invalid option is reported with what to change.
func New(store Store, opts ...Option) (*Client, error) {
	if store == nil {
		return nil, errors.New("idem: New: nil Store (use idem.Open to open a journal file)")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(cfg)
	}
	if err := cfg.err(); err != nil {
		return nil, err
	}
	hc := defaultHTTPClient()
	if cfg.httpClient != nil {
		copied := *cfg.httpClient
		hc = &copied
	}
	// A redirected POST becomes a GET without its body; a 3xx is returned
	// as is and classified instead.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{
		cfg:      *cfg,
		store:    store,
		hc:       hc,
		budget:   newRetryBudget(cfg.retryTokens, cfg.retryRatio),
		log:      cfg.logger,
		inflight: make(map[string]*call),
	}, nil
}

// Open opens (or creates, mode 0600) the journal file at path with fsync on
// and returns a Client that owns it: Close closes both. A journal held by
// another process fails after a bounded wait with an error matching
// journal.ErrLocked.
func Open(path string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(cfg)
	}
	if err := cfg.err(); err != nil {
		return nil, err
	}
	store, err := journal.Open(path, cfg.journalOpts...)
	if err != nil {
		return nil, fmt.Errorf("idem: open journal: %w", err)
	}
	c, err := New(store, opts...)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	c.ownsStore = true
	return c, nil
}

// defaultHTTPClient has a pool sized for many concurrent callers: the
// standard two idle connections per host cost a third of the throughput.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// Close closes the journal if the Client opened it (Open). Calls still in
// flight finish their current journal write; later calls return ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.ownsStore {
		return c.store.Close()
	}
	return nil
}

// NewKey returns a fresh random idempotency key (a UUID), for callers that
// must know the key before building the body (WithKeyInBody).
func NewKey() string { return uuid.NewString() }

// Prepare journals the operation (fsync'd) and returns it without sending
// anything; Do sends it. Preparing the same (scope, key) again with the same
// method, URL and body returns the journaled operation; with a different
// request it returns ErrKeyConflict.
func (c *Client) Prepare(ctx context.Context, req Request) (*Operation, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	rec, err := c.newRecord(req)
	if err != nil {
		return nil, err
	}
	stored, err := c.store.Create(ctx, rec)
	switch {
	case errors.Is(err, journal.ErrExists):
		if !sameRequest(stored, rec) {
			return nil, c.conflict(stored)
		}
		return newOperation(stored), nil
	case err != nil:
		return nil, fmt.Errorf("idem: prepare: journal: %w", err)
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "idem: prepared", opAttrs(stored)...)
	return newOperation(stored), nil
}

// Submit is Prepare followed by Do in one call, and cheaper: the operation
// and its first attempt are journaled in one commit. Resubmitting the same
// request with the same Key drives the journaled operation instead (it is
// never sent twice once settled).
func (c *Client) Submit(ctx context.Context, req Request) (*Result, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	rec, err := c.newRecord(req)
	if err != nil {
		return nil, err
	}
	return c.coalesce(ctx, rec.Scope, rec.Key, func() (*Result, error) {
		now := c.cfg.clock.Now()
		rec.Attempts = []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: now}}
		rec.FirstSent = now
		stored, err := c.store.Create(ctx, rec)
		switch {
		case errors.Is(err, journal.ErrExists):
			if !sameRequest(stored, rec) {
				return nil, c.conflict(stored)
			}
			return c.drive(ctx, stored, foreground, false)
		case err != nil:
			return nil, fmt.Errorf("idem: submit: journal: %w", err)
		}
		return c.drive(ctx, stored, foreground, true)
	})
}

// Do drives a journaled operation until it settles or the call's budget is
// spent: it sends the same key and bytes on every attempt, queries the
// result endpoint when an answer is ambiguous, and waits per the backoff and
// Retry-After. An operation already succeeded or failed returns its result
// with no request sent.
//
// Do returns a non-nil Result for every journaled operation. The error is
// nil when it succeeded; otherwise an *Error matching ErrFailed,
// ErrKeyConflict or ErrUnknownOutcome. On ErrUnknownOutcome the operation
// stays in the journal, due for Resume and Run: do not retry it under a new
// key. A cancelled ctx never marks an operation failed.
func (c *Client) Do(ctx context.Context, op *Operation) (*Result, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if op == nil {
		return nil, fmt.Errorf("%w: Do: nil *Operation (get one from Prepare or Lookup)", ErrInvalidRequest)
	}
	return c.coalesce(ctx, op.Scope, op.Key, func() (*Result, error) {
		// Read even if ctx is done, so the caller still learns the state.
		rec, err := c.store.Get(context.WithoutCancel(ctx), op.Scope, op.Key)
		if err != nil {
			return nil, c.lookupErr(op.Scope, op.Key, err)
		}
		return c.drive(ctx, rec, foreground, false)
	})
}

// Lookup returns the journaled operation, or an error matching ErrNotFound.
func (c *Client) Lookup(ctx context.Context, scope, key string) (*Operation, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	rec, err := c.store.Get(ctx, scope, key)
	if err != nil {
		return nil, c.lookupErr(scope, key, err)
	}
	return newOperation(rec), nil
}

// Filter selects operations for List; see journal.Filter.
type Filter = journal.Filter

// List returns the journaled operations that match f, for example every
// operation flagged for review: List(ctx, idem.Filter{Review: true}).
func (c *Client) List(ctx context.Context, f Filter) ([]*Operation, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	recs, err := c.store.List(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("idem: list: %w", err)
	}
	ops := make([]*Operation, len(recs))
	for i, r := range recs {
		ops[i] = newOperation(r)
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
}

// Resolve settles an operation by hand. It is the only way out of a
// terminal state too, and is recorded (who, why, when, previous state) and
// logged at Warn level. Nothing is sent.
func (c *Client) Resolve(ctx context.Context, scope, key string, r Resolution) (*Result, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if !r.State.Terminal() {
		return nil, fmt.Errorf("%w: Resolve: state must be %s or %s, got %q", ErrInvalidRequest, StateSucceeded, StateFailed, r.State)
	}
	if strings.TrimSpace(r.Reason) == "" || strings.TrimSpace(r.By) == "" {
		return nil, fmt.Errorf("%w: Resolve: Reason and By are required: a manual settlement must say who and why", ErrInvalidRequest)
	}
	rec, err := c.store.Resolve(ctx, scope, key, journal.Manual{
		State: r.State, ResourceID: r.ResourceID, Reason: r.Reason, By: r.By, At: c.cfg.clock.Now(),
	})
	if err != nil {
		return nil, c.lookupErr(scope, key, err)
	}
	c.log.LogAttrs(ctx, slog.LevelWarn, "idem: resolved by hand",
		append(opAttrs(rec), slog.String("by", r.By), slog.String("reason", r.Reason))...)
	res := newResult(rec)
	if c.cfg.hooks.Settle != nil {
		c.cfg.hooks.Settle(res)
	}
	return res, nil
}

func (c *Client) lookupErr(scope, key string, err error) error {
	if errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("%w: scope %q, key %q", ErrNotFound, scope, key)
	}
	return fmt.Errorf("idem: journal: %w", err)
}

func (c *Client) conflict(stored *journal.Record) error {
	return &Error{Scope: stored.Scope, Key: stored.Key, State: stored.State, Attempts: attemptCount(stored),
		Kind: ErrKeyConflict, Cause: errors.New("idem: the journal holds this key for a different method, URL or body")}
}

// coalesce runs fn unless a call for the same key is in flight, in which
// case it waits for that call and shares its result.
func (c *Client) coalesce(ctx context.Context, scope, key string, fn func() (*Result, error)) (*Result, error) {
	id := scope + "\x00" + key
	c.mu.Lock()
	if cl, ok := c.inflight[id]; ok {
		c.mu.Unlock()
		select {
		case <-cl.done:
			return cl.res.clone(), cl.err
		case <-ctx.Done():
			return c.current(scope, key, ctx.Err())
		}
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[id] = cl
	c.mu.Unlock()

	defer func() {
		c.mu.Lock()
		delete(c.inflight, id)
		c.mu.Unlock()
		close(cl.done)
	}()
	cl.res, cl.err = fn()
	return cl.res.clone(), cl.err
}

// current reports the journaled state to a caller that stopped waiting.
func (c *Client) current(scope, key string, cause error) (*Result, error) {
	rec, err := c.store.Get(context.Background(), scope, key)
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
	res := newResult(rec)
	e := &Error{Scope: rec.Scope, Key: rec.Key, State: rec.State, Attempts: res.Attempts, Cause: cause}
	switch rec.State {
	case StateSucceeded:
		return res, nil
	case StateFailed:
		e.Kind = ErrFailed
		if rec.Result != nil && rec.Resolved == nil && c.cfg.classify(rec.Result.StatusCode) == Conflict {
			e.Kind = ErrKeyConflict
		}
		if e.Cause == nil {
			e.Cause = errors.New(res.Reason)
		}
	default:
		e.Kind = ErrUnknownOutcome
	}
	return res, e
}

// secretHeaders are never journaled: they would outlive their credentials.
var secretHeaders = [...]string{"Authorization", "Cookie", "Proxy-Authorization"}

const maxNameLen = 255

// checkName validates a key or scope: it travels in a header and keys a
// journal record, so visible ASCII only.
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidRequest, what)
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("%w: %s is %d bytes; at most %d", ErrInvalidRequest, what, len(s), maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return fmt.Errorf("%w: %s %q has byte %#x at %d; use visible ASCII (a UUID is fine)", ErrInvalidRequest, what, s, s[i], i)
		}
	}
	return nil
}

// newRecord validates req and turns it into a pending journal record.
func (c *Client) newRecord(req Request) (*journal.Record, error) {
	scope := req.Scope
	if scope == "" {
		scope = c.cfg.scope
	}
	if err := checkName("scope", scope); err != nil {
		return nil, err
	}
	key := req.Key
	if key == "" {
		if c.cfg.keyHeader == "" {
			return nil, fmt.Errorf("%w: with WithKeyInBody, set Request.Key (idem.NewKey()) and put it in the body", ErrInvalidRequest)
		}
		key = uuid.NewString()
	}
	if err := checkName("key", key); err != nil {
		return nil, err
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	if strings.ContainsAny(method, " \t\r\n") || strings.ToUpper(method) != method {
		return nil, fmt.Errorf("%w: method %q; use an upper-case HTTP method such as POST", ErrInvalidRequest, method)
	}
	u, err := absoluteURL("URL", req.URL)
	if err != nil {
		return nil, err
	}
	resultURL := req.ResultURL
	if resultURL == "" && c.cfg.resultTemplate != "" {
		ref, err := url.Parse(strings.ReplaceAll(c.cfg.resultTemplate, "{key}", url.PathEscape(key)))
		if err != nil {
			return nil, fmt.Errorf("%w: result endpoint for key %q: %v", ErrInvalidRequest, key, err)
		}
		resultURL = u.ResolveReference(ref).String()
	}
	if resultURL != "" {
		if _, err := absoluteURL("ResultURL", resultURL); err != nil {
			return nil, err
		}
	}
	if len(req.Body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: body is %d bytes; at most %d can be journaled", ErrInvalidRequest, len(req.Body), MaxBodyBytes)
	}
	if len(req.Ref) > maxNameLen {
		return nil, fmt.Errorf("%w: Ref is %d bytes; at most %d", ErrInvalidRequest, len(req.Ref), maxNameLen)
	}
	header := req.Header.Clone()
	for name := range header {
		canon := http.CanonicalHeaderKey(name)
		for _, s := range secretHeaders {
			if canon == s {
				return nil, fmt.Errorf("%w: %s would be written to disk; add credentials at send time with idem.WithRequestHook or your http.Client's Transport", ErrSecretHeader, s)
			}
		}
		if c.cfg.keyHeader != "" && canon == c.cfg.keyHeader {
			return nil, fmt.Errorf("%w: Header sets %s, which idem sets from Request.Key", ErrInvalidRequest, canon)
		}
	}
	if header == nil {
		header = http.Header{}
	}
	if header.Get("Content-Type") == "" && len(req.Body) > 0 {
		header.Set("Content-Type", "application/json")
	}
	now := c.cfg.clock.Now()
	body := bytes.Clone(req.Body)
	return &journal.Record{
		Scope:    scope,
		Key:      key,
		Ref:      req.Ref,
		Method:   method,
		URL:      u.String(),
		QueryURL: resultURL,
		Header:   header,
		Body:     body,
		BodySHA:  sha256.Sum256(body),
		State:    StatePending,
		Created:  now,
		Updated:  now,
		// Due only if the caller abandons it: Do normally settles it first.
		NextDue: now.Add(c.cfg.reconcileInterval),
	}, nil
}

func absoluteURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidRequest, field, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %s %q must be an absolute http or https URL", ErrInvalidRequest, field, u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: %s carries credentials (user:password@); they would be journaled: use WithRequestHook", ErrSecretHeader, field)
	}
	return u, nil
}

// sameRequest reports whether a resubmitted request matches the journaled
// one: the server's own idempotency check compares the same things.
func sameRequest(stored, rec *journal.Record) bool {
	return stored.Method == rec.Method && stored.URL == rec.URL && stored.BodySHA == rec.BodySHA
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
