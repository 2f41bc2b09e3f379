package idem

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

// Hooks receive an operation's events, for metrics, traces and a service's
// own reactions (page someone on a review, retry a handed-off order
// later). Every field is optional.
//
// Each hook runs synchronously on the goroutine that produced the event,
// with the context of the call (Do, Submit, Resolve) or of the Resume or
// Run visit that produced it, and only after what it reports is committed
// to the journal (a hook never learns of an outcome a crash could undo;
// Attempt is the one exception, below).
// Each event is reported exactly once: callers joined to a call in flight
// share its events, and a Run visit that leaves an operation as it was
// reports nothing but its attempts. Keep hooks fast, and never call Close
// or Shutdown from one (they wait for the call that runs it). A panic in
// one goes on up the stack of the Do or Submit that runs it; one in a
// Resume or Run visit, on idem's goroutines, is caught and logged, the
// operation left as journaled (see Resume). A Settle or ConfirmConflict
// hook's panic does not skip the Review hook of the same event.
type Hooks struct {
	// Trace returns the trace context of the call that journals a new
	// operation (Prepare, PrepareIn, Submit), for example a W3C traceparent and
	// tracestate, kept with the operation so that a later Resume or Run
	// visit can link back to the trace that started it (CallEvent.Trace).
	// Up to MaxTraceBytes are kept; a longer one is dropped.
	Trace func(ctx context.Context) string
	// Call is called when a call starts driving an open operation: Do,
	// Submit, a Resume or a Run visit, not a caller joined to one in
	// flight. The context it returns (derived from ctx) is the one the
	// call's other hooks get; it does not reach the HTTP requests. end,
	// when not nil, is called once as the call returns, with what it
	// returns.
	Call func(ctx context.Context, ev CallEvent) (_ context.Context, end func(*Result, error))
	// Attempt is called after every HTTP exchange, once its outcome is
	// journaled (or the journal refused it: the request was sent all the
	// same, and counts).
	Attempt func(ctx context.Context, ev AttemptEvent)
	// Settle is called when an operation becomes succeeded or failed,
	// whoever settled it: a call, a Resume or Run visit, or Resolve (also
	// when Resolve settles an operation that was settled already). A
	// failed Result with Review set (ReviewMaybeTwice, ReviewMadeTwice,
	// ReviewConfirmConflict) may have executed: Do reports it as
	// ErrNeedsReview, never ErrFailed, and it is no failure to retry
	// under a new key. A succeeded one flagged ReviewKeyInUse (an event
	// settled it while another request held the key) may be that
	// request's: Do reports it as ErrNeedsReview, and it is no success
	// to ship on.
	Settle func(ctx context.Context, res *Result)
	// Review is called when an operation is flagged for review: automatic
	// reconciliation gave up on it and a person must look (Result.Review
	// says why). It fires once per flagging, not on every later visit;
	// after Settle, for an operation settled and flagged at once
	// (ReviewMaybeTwice, ReviewMadeTwice). A drive (Do, Resume, Run)
	// that settles an operation already flagged ReviewKeyIgnored as
	// ReviewMaybeTwice calls it again with the new reason; Confirm,
	// which has no drive, calls Settle only. A Confirm that flags an
	// operation ReviewKeyIgnored itself and then fails to record the
	// confirmation calls it for that flag: the redelivery finds the
	// operation flagged.
	Review func(ctx context.Context, res *Result)
	// Handoff is called when a Do or Submit call spent its budget (or the
	// retry budget) and handed the operation to the reconciler: the call
	// returns ErrUnknownOutcome, and the operation is unknown (or still
	// pending, if nothing can have been sent). Wait learns its outcome.
	Handoff func(ctx context.Context, res *Result)
	// RunError is called for every pass of Run that met a journal error,
	// the one that stops Run too, once Health reports it (Health says
	// whether Run goes on).
	RunError func(ctx context.Context, err error)
	// ConfirmConflict is called when Confirm met a confirmation that
	// contradicts the recorded outcome (which it kept, flagging the
	// operation for review), with the operation's Result and the
	// confirmation; once per event. Review is called too when the
	// operation was not flagged already. A call's own answer that
	// contradicts how a confirmation or Resolve settled the operation
	// while its request was on the wire is reported here too (Source
	// ResponseSource), its State processing when the server said it is
	// still executing a request settled failed, KeyInUse when it said
	// another request holds the key (the operation flagged
	// ReviewKeyInUse).
	ConfirmConflict func(ctx context.Context, res *Result, conf Confirmation)
}

// MaxTraceBytes bounds the trace context journaled with an operation: a
// traceparent is 55 bytes and W3C bounds a tracestate at 512.
const MaxTraceBytes = 1024

// CallEvent describes a call that starts driving an operation.
type CallEvent struct {
	Scope, Key string
	Method     string
	// URL is as journaled: no credentials (they are added at send
	// time). A record journaled by a release that still accepted them
	// has its user information and secret query parameters' values
	// shown as REDACTED, as the admin handler and the idem command show
	// them.
	URL       string
	ResultURL string // the result endpoint's URL, as URL is; empty if none
	// Kind is "call" (Do, Submit), "resume" or "reconcile" (a Run visit).
	Kind string
	// Trace is the trace context journaled with the operation by
	// Hooks.Trace; empty if none.
	Trace    string
	State    State // the journaled state as the call starts
	Attempts int   // exchanges made before this call
}

// AttemptEvent describes one finished HTTP exchange.
type AttemptEvent struct {
	Scope, Key string
	Number     int
	Query      bool // a result query rather than a submit
	Wrote      bool // the request was fully written: the server may have acted
	StatusCode int  // 0 for a transport error
	// Err is what failed the exchange (the transport, the request hook,
	// a body cut short, the server's refusal in its words), its text
	// quoting the URL as journaled (a credential an earlier release
	// journaled in it redacted), not as the request hook changed it,
	// with the credentials the request was sent with blanked wherever
	// it quotes them, a server's words too (the values of its
	// credential headers, ErrSecretHeader's names, but the key's; of
	// its URL's user and secret query parameters, and of the query
	// parameters the hook added; the path segments the hook added; one
	// under 8 bytes where it stands as a word), and cut
	// to 1024 bytes (net/http quotes a malformed status line whole, up
	// to 10 MiB); errors.Is and errors.As see the error as it came. The
	// journal keeps 512 bytes.
	Err        error
	RetryAfter time.Duration
	Start      time.Time // on the Client's clock
	Duration   time.Duration
}

// callKind names a drive mode for CallEvent.Kind.
func callKind(m driveMode) string {
	switch m {
	case resuming:
		return "resume"
	case reconciling:
		return "reconcile"
	}
	return "call"
}

// traceOf is the trace context to journal with a new operation.
func (c *Client) traceOf(ctx context.Context) string {
	if c.cfg.hooks.Trace == nil {
		return ""
	}
	if t := c.cfg.hooks.Trace(ctx); len(t) <= MaxTraceBytes {
		return t
	}
	return ""
}

// callStarted tells the Call hook that a drive begins and returns the
// context for the drive's hooks and the function that ends the call.
func (c *Client) callStarted(ctx context.Context, rec *journal.Record, mode driveMode) (context.Context, func(*Result, error)) {
	if c.cfg.hooks.Call == nil || !rec.Open() {
		return ctx, nil
	}
	// A record journaled before its credential was refused (finished
	// after the upgrade, not stranded) holds it in its URL: shown
	// redacted, as the admin handler and the idem command show it.
	hctx, end := c.cfg.hooks.Call(ctx, CallEvent{
		Scope: rec.Scope, Key: rec.Key, Method: rec.Method, Kind: callKind(mode),
		URL: httpsyntax.RedactURL(rec.URL), ResultURL: httpsyntax.RedactURL(rec.QueryURL),
		Trace: rec.Trace, State: rec.State, Attempts: attemptCount(rec),
	})
	if hctx == nil {
		hctx = ctx
	}
	return hctx, end
}

// driveEnded reports what a drive committed: a settlement, a flagging, a
// hand-off. Each is the drive's own, so each fires once.
func (c *Client) driveEnded(ctx context.Context, d *driver, wasReview string, settled bool, res *Result) {
	switch {
	case settled:
		if (res.Review == ReviewMaybeTwice || res.Review == ReviewMadeTwice) && c.cfg.hooks.Review != nil {
			// Settled and flagged in one commit: a person must look all
			// the same. Deferred, so that it still runs after the Settle
			// hook if that panics: no later visit comes to a settled
			// operation to tell the person.
			defer c.cfg.hooks.Review(ctx, res.clone())
		}
		c.settled(ctx, res)
	// A contradicting confirmation flags the operation in Confirm's (or
	// lateAnswer's) own commit, which reports it: it is never the drive's.
	// ReviewKeyMoved told a person only where another Client put the key:
	// a later flag (a deadline passed, the endpoint ignoring the key) is
	// news.
	case d.rec.Open() && d.rec.Review != "" && d.rec.Review != wasReview && (wasReview == "" || wasReview == ReviewKeyMoved) &&
		d.rec.Review != ReviewConfirmConflict:
		c.flagged(ctx, res)
	case d.handedOff && d.mode == foreground && d.rec.Open():
		if c.cfg.hooks.Handoff != nil {
			c.cfg.hooks.Handoff(ctx, res.clone())
		}
	}
}

// settled reports a settlement committed by whoever made it (a drive,
// Resolve, Confirm), which calls it once: it wakes Wait and calls
// Hooks.Settle.
func (c *Client) settled(ctx context.Context, res *Result) {
	c.watch.notify(res.Scope, res.Key)
	if c.cfg.hooks.Settle != nil {
		c.cfg.hooks.Settle(ctx, res.clone())
	}
}

// flagged reports that an operation not flagged before was flagged for
// review: it wakes Wait and calls Hooks.Review.
func (c *Client) flagged(ctx context.Context, res *Result) {
	c.watch.notify(res.Scope, res.Key)
	if c.cfg.hooks.Review != nil {
		c.cfg.hooks.Review(ctx, res.clone())
	}
}

// conflicted reports a confirmation that contradicted the recorded outcome
// and flagged the operation (wasReview: its review reason before; a
// flagged operation is not reported as flagged again; ReviewKeyMoved,
// which told a person nothing, counts as none, as in driveEnded).
func (c *Client) conflicted(ctx context.Context, res *Result, conf Confirmation, wasReview string) {
	if wasReview == "" || wasReview == ReviewKeyMoved {
		// Deferred, so that it still runs after the ConfirmConflict hook
		// if that panics: a redelivery of the event calls no hook, and
		// the person would never be told.
		defer c.flagged(ctx, res)
	}
	if c.cfg.hooks.ConfirmConflict != nil {
		c.cfg.hooks.ConfirmConflict(ctx, res.clone(), conf)
	}
}

func (c *Client) runFailed(ctx context.Context, err error) {
	if c.cfg.hooks.RunError != nil {
		c.cfg.hooks.RunError(ctx, err)
	}
}

// Wait blocks until the operation is settled (succeeded or failed) or
// flagged for review, and returns its result, or until ctx ends (its
// cause, with the journaled state as the Result) or the Client closes
// (ErrClosed). It returns at once if the operation is already there.
// The error is nil once it is: read Result.State and Result.Review (a
// failed Result with Review set may have executed: Do reports it as
// ErrNeedsReview, never ErrFailed; a succeeded one with
// ReviewConfirmConflict may have failed, one with ReviewKeyInUse may be
// another request's success).
//
// A settlement in this process (a call, Resume, Run, Resolve) wakes Wait
// at once. One made by another process sharing the journal is seen by
// reading the journal again, every WaitPoll on the Client's clock (a test
// clock whose Sleep returns at once, as idemtest.Clock's does, makes that
// a tight loop that moves the clock). An unknown key is an error matching
// ErrNotFound. An empty scope is the
// client's default (WithScope).
func (c *Client) Wait(ctx context.Context, scope, key string) (*Result, error) {
	ctx, b, err := c.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer c.end(b)
	scope = c.scopeOr(scope)
	for {
		woken, cancel := c.watch.add(scope, key)
		rec, err := c.store.Get(context.WithoutCancel(ctx), scope, key)
		if err != nil {
			cancel()
			return nil, c.lookupErr(scope, key, err)
		}
		res := c.newResult(rec)
		if !rec.Open() || rec.Review != "" {
			cancel()
			return res, nil
		}
		err = c.sleepUntil(ctx, woken, WaitPoll)
		cancel()
		if ctx.Err() != nil {
			return res, context.Cause(ctx)
		}
		if err != nil {
			return res, err
		}
	}
}

// WaitPoll is how often Wait reads the journal again for a settlement made
// by another process.
const WaitPoll = 5 * time.Second

// sleepUntil waits d on the Client's clock, or until woken is closed or
// ctx ends; only ctx's end is an error.
func (c *Client) sleepUntil(ctx context.Context, woken <-chan struct{}, d time.Duration) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-woken:
			cancel()
		case <-stop:
		}
	}()
	if err := c.cfg.clock.Sleep(sctx, d); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// watchers are the channels of Wait calls, per operation, closed when the
// operation settles or is flagged. The zero value is ready to use.
type watchers struct {
	mu sync.Mutex
	m  map[opID]map[*chan struct{}]struct{}
}

// opID names an operation in the Client's maps.
type opID struct{ scope, key string }

// add registers a waiter for (scope, key); cancel unregisters it.
func (w *watchers) add(scope, key string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	id := opID{scope, key}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[opID]map[*chan struct{}]struct{})
	}
	if w.m[id] == nil {
		w.m[id] = make(map[*chan struct{}]struct{})
	}
	w.m[id][&ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.m[id]; ok {
			delete(set, &ch)
			if len(set) == 0 {
				delete(w.m, id)
			}
		}
	}
}

// notify wakes every waiter of (scope, key).
func (w *watchers) notify(scope, key string) {
	id := opID{scope, key}
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[id] {
		close(*ch)
	}
	delete(w.m, id)
}

// attemptStart is when attempt number began, as journaled.
func (d *driver) attemptStart(number int, ex exchange) time.Time {
	for i := len(d.rec.Attempts) - 1; i >= 0; i-- {
		if a := d.rec.Attempts[i]; a.Number == number {
			return a.Start
		}
	}
	return d.now().Add(-ex.dur)
}
