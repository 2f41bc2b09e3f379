package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem/internal/owned"
	"github.com/idemkit/idem/journal"
)

// driveMode is who drives an operation: a caller waiting for it, or the
// reconciler, which never sleeps and reschedules instead.
type driveMode int

const (
	foreground  driveMode = iota // Do, Submit: a caller waits
	resuming                     // Resume: waits like a caller, but automatic
	reconciling                  // Run: never sleeps, reschedules
)

// reviewRecheck is how often a flagged operation is queried again once its
// result endpoint has answered (recheckAt): it may still settle by itself.
const reviewRecheck = 24 * time.Hour

// journalError marks a failed journal write: the reconciler stops on it
// rather than keep sending what it cannot record.
type journalError struct{ err error }

func (e *journalError) Error() string { return "idem: " + e.err.Error() } // "idem: journal: …"
func (e *journalError) Unwrap() error { return e.err }

// errSettledElsewhere ends a drive whose record became terminal under it
// (a manual resolution, a confirmation).
var errSettledElsewhere = errors.New("idem: settled elsewhere")

// errHostSilent ends a call whose resend waits for its host's clock: the
// probe asking it timed out (driver.unasked).
var errHostSilent = errors.New("idem: the host's clock could not be asked (its probe got no answer within the attempt timeout); the operation an earlier process sent is resent once it can be, by Client.Run or the next Resume")

// errHostRefused ends a Resume or Run visit whose resend waits for its
// host's clock: the probe asking it was refused (driver.refusedProbe).
var errHostRefused = errors.New("idem: the host's clock could not be asked (its probe was refused); the operation an earlier process sent is resent once it can be, by Client.Run or the next Resume")

// errClockAhead ends a call that could not judge the key window: the
// clock reads further ahead than Run has measured (resendBlock).
var errClockAhead = errors.New("idem: the clock reads further ahead than the reconciler has measured (stepped?); the key window is judged again on the next visit")

// driver runs the submit-or-check loop for one operation, one call.
type driver struct {
	c         *Client
	ctx       context.Context // the caller's: ends waiting, never the operation
	hctx      context.Context // the hooks': ctx, as Hooks.Call returned it
	wctx      context.Context // journal writes: must finish even if ctx ends
	rec       *journal.Record
	mode      driveMode
	start     time.Time
	deadline  time.Time
	exchanges int
	submits   int             // submits sent by this call
	bo        backoff.BackOff // made at the first wait: most calls never wait
	// refusedProbes: clock probes of this call refused at once, each
	// counted against maxAttempts as the resend it stood in for
	// (refusedProbe).
	refusedProbes int
	// hookChanged: the last submit, refused unsent for what the request
	// hook changed (hookChangeErr), which the call's error names.
	hookChanged *hookChangeError
	// serverUntil: when the last answer's Retry-After ends, bounded by
	// the reconciler's longest interval; a hand-off honours it in full.
	serverUntil time.Time
	// preRecorded: the last attempt was journaled with the record itself
	// (Submit) and has not been sent yet.
	preRecorded bool
	// reviewed: this call flagged the operation for review; it may still
	// query, never resend.
	reviewed bool
	// awaitsRun: the flag came with an answer saying a payment runs that
	// may be this request's (judgment.awaits): a query finding nothing
	// is asked again until the budget ends, not flagged at once.
	awaitsRun bool
	// wasReview: the operation's review reason when this call began ("":
	// not flagged), what a person was told before it (flag, driveEnded).
	// d.rec's may be this call's own by then: a query's commit (a 410)
	// writes the reason before flag runs.
	wasReview string
	// handedOff: this call committed a hand-off to the reconciler.
	handedOff bool
	// keyIgnored: an answer to this call's submits, or to an earlier
	// call's to the same endpoint (Client.ignoring), said the server does
	// not de-duplicate by the key there (a 429 so marked is resent). An
	// answer that says nothing (a lost one) is judged as if it said so
	// too: the server would take a resend for a new request.
	keyIgnored bool
	// answerHeader: the header of the submit's answer while answerOf
	// reads it (the caller's classifier and decoder run there), nil
	// otherwise: a visit whose decoder panicked learns from it that the
	// endpoint ignores the key (learnIgnoredBeforePanic).
	answerHeader http.Header
	// ignoredEndpoint: resendBlock found the operation's endpoint known
	// to ignore the key, and its writes from then on flag it so
	// (markIgnored).
	ignoredEndpoint bool
	// lease: the drive's claim on the operation (lease.go); every write
	// carries it. leaseLost: another owner took it over.
	lease     journal.Lease
	leaseLost bool
	// journalStalled: a journal call of this drive gave up waiting for
	// the Store's database (storeStalled); the drive makes no more.
	journalStalled bool
	// late: the server's answer to this call, which met a confirmation
	// or resolution that settled the operation while the request was on
	// the wire (lateAnswer), and agreed with it or (lateContradicts)
	// contradicted a failure. Only its resource id and state are
	// journaled, so the call's Result takes the rest from here.
	late            *exchange
	lateContradicts bool
	// brief: a Resume visit to a host whose operations stay processing
	// (ref.brief); one still processing is handed off, not waited for.
	brief bool
	// probeWaited: this drive waited for its host's probe to end, or
	// sent it (awaitProbe), and does not again.
	probeWaited bool
	// probeRefused: the host's probe was refused and nothing has asked
	// the host since (refusedProbe): this caller's resend waits its
	// backoff and asks the host's clock again instead of going.
	probeRefused bool
	// ignoringKept: the endpoint of this drive's operation, flagged
	// ReviewKeyIgnored, is journaled (keepFlagged) before its query.
	ignoringKept bool
	// silentHost: the drive ended unsent because its host's clock probe
	// timed out or was refused (unasked): the host gave no answer, as a
	// visit whose resend timed out or was refused, and Run counts it so
	// (hostNews).
	silentHost bool
}

// drive runs the loop and converts its end into what Do returns.
func (c *Client) drive(ctx context.Context, rec *journal.Record, l journal.Lease, mode driveMode, preRecorded bool) (*Result, error) {
	res, _, _, err := c.driveSettling(ctx, rec, l, mode, preRecorded, false)
	return res, err
}

// driveSettling is drive that also reports whether this drive settled the
// operation: not when someone else (Resolve, Confirm) settled it under
// the drive, who told the hooks. brief is driver.brief.
func (c *Client) driveSettling(ctx context.Context, rec *journal.Record, l journal.Lease, mode driveMode, preRecorded, brief bool) (*Result, bool, hostNews, error) {
	// Before the drive writes: one that moves a flagged operation ahead of
	// where a first resend's walk (ignoringLearnt) stands hides it from
	// the walk, and its endpoint would be taken for one that de-duplicates.
	c.ignoring.relearn(rec)
	now := c.cfg.clock.Now()
	before := attemptCount(rec)
	d := &driver{
		c: c, ctx: ctx, wctx: context.WithoutCancel(ctx), rec: rec, mode: mode,
		start: now, deadline: now.Add(c.cfg.maxElapsed), preRecorded: preRecorded, lease: l, brief: brief, wasReview: rec.Review,
	}
	wasOpen := rec.Open()
	if wasOpen && !preRecorded {
		c.sights.read(rec, now, c.cfg.reconcileDeadline)
	}
	ran := false
	defer func() {
		if ran {
			return // no recover, no cost
		}
		// A panic of the Call hook (visitCaught catches a visit's), or of
		// the caller's code in a caller's drive (a decoder, classifier or
		// hook: runFlagging lets it go on up the caller's stack), skipped
		// release below: the claim kept every other owner (another
		// replica's reconciler, the caller's retry landing there) off the
		// operation until it expired.
		if p := recover(); p != nil {
			d.release(false)
			panic(p)
		}
	}()
	hctx, end := c.callStarted(ctx, rec, mode)
	d.hctx = hctx
	run := d.runCaught
	if mode == foreground {
		run = d.runFlagging
	}
	cause := run()
	ran = true
	elsewhere := errors.Is(cause, errSettledElsewhere)
	d.release(elsewhere)
	switch {
	case d.rec.Open() && d.submits > 0:
		ours := before // the attempts past it are this drive's
		if preRecorded {
			ours-- // and the one journaled with the record, which it sent
		}
		c.sights.made(d.rec, ours, c.cfg.clock.Now(), c.cfg.reconcileDeadline)
	case !d.rec.Open():
		c.sights.forget(d.rec.Scope, d.rec.Key)
	}
	if elsewhere {
		cause = nil // whoever settled it (Resolve) told the hooks
	}
	res, err := c.finish(d.rec, cause)
	d.lateAnswerResult(res)
	settled := wasOpen && !d.rec.Open() && !elsewhere
	d.reportEnd(end, wasOpen && !elsewhere, settled, res, err)
	queriesHost := c.queriesHost(d.rec)
	news := hostNews{reach: reachOf(d.rec, before, queriesHost), stuckElsewhere: stuckElsewhere(d.rec, before, queriesHost)}
	if news.reach == reachNone && d.silentHost {
		news.reach = reachSilent
	}
	throttleNews(&news, d.rec, before, queriesHost, d.serverUntil)
	return res, settled, news, err
}

// runFlagging is run for a caller's call (Do, Submit), whose panic goes
// on up the caller's stack. The send it followed was journaled:
// unflagged, the next Resume resent it blind to an endpoint its answer
// had said ignores the key, a second charge.
func (d *driver) runFlagging() error {
	defer func() {
		if d.answerHeader == nil {
			return // not amid the submit's answer: no recover, no cost
		}
		p := recover()
		if p == nil {
			return // runtime.Goexit goes on
		}
		if d.rec.Open() && !d.leaseLost && !d.journalStalled && d.learnIgnoredBeforePanic() {
			_ = d.flag(ReviewKeyIgnored, fmt.Errorf("%w: %v", errCallPanicked, p))
		}
		panic(p)
	}()
	return d.run()
}

// runCaught is run for Resume and Run, whose visits run on idem's
// goroutines where no caller can recover a panic: it catches one of the
// caller's code (a decoder, classifier, request hook, transport, Attempt
// hook): uncaught, it killed the process, and the next start-up's Resume
// met the same answer and died again, for ever. The operation is handed
// off as any unsettled visit's is: what may have been sent is unknown,
// asked about by the next visit.
func (d *driver) runCaught() (cause error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		cause = d.c.visitPanicked(d.ctx, d.mode, p, d.rec.Open(), opAttrs(d.rec))
		if d.rec.Open() && !d.leaseLost && !d.journalStalled {
			end := d.handoff
			if d.learnIgnoredBeforePanic() {
				end = func(cause error, _ time.Time) error { return d.flag(ReviewKeyIgnored, cause) }
			}
			if err := end(cause, time.Time{}); err != cause {
				cause = errors.Join(cause, err)
			}
		}
	}()
	return d.run()
}

// learnIgnoredBeforePanic reports whether the submit's answer that the
// caller's code panicked on said the endpoint ignores the key (as
// answerOf reads it), and then learns the endpoint as submit does.
// Handed off unflagged, the endpoint neither known nor journaled, every
// later visit resent the request there, where each send is another
// charge (Solidgate's Idempotency-Status: ignored).
func (d *driver) learnIgnoredBeforePanic() bool {
	h := d.answerHeader
	d.answerHeader = nil
	if h == nil {
		return false
	}
	if marked, cached := answerMarks(h); !submitIgnoresKey(h, marked, cached) {
		return false
	}
	if !d.keyIgnored {
		d.c.ignoring.add(d.rec)
	}
	d.keyIgnored = true
	return true
}

// reportEnd tells the hooks how the drive ended (driveEnded, if report)
// and ends the call (end, Hooks.Call's). In a Resume or Run visit a panic
// of theirs is logged and goes no further: it came after the drive
// committed, and up the visit's stack it skipped the WithSettleFunc
// callback of a settlement, which no later visit reports; nor does it
// skip end, which leaves the Call hook's span or gauge open for ever.
func (d *driver) reportEnd(end func(*Result, error), report, settled bool, res *Result, err error) {
	if d.mode == foreground {
		if report {
			d.c.driveEnded(d.hctx, d, d.wasReview, settled, res)
		}
		if end != nil {
			end(res.clone(), err)
		}
		return
	}
	if end != nil {
		defer func() {
			defer d.endPanicked()
			end(res.clone(), err)
		}()
	}
	defer d.endPanicked()
	if report {
		d.c.driveEnded(d.hctx, d, d.wasReview, settled, res)
	}
}

// endPanicked, deferred, logs a panic of a hook reportEnd runs in a
// visit and lets it go no further.
func (d *driver) endPanicked() {
	if p := recover(); p != nil {
		_ = d.c.visitPanicked(d.ctx, d.mode, p, d.rec.Open(), opAttrs(d.rec))
	}
}

// visitPanicked logs a panic a Resume or Run visit caught, with its stack
// and whether the operation is still open (a hook told of a settlement
// panics after it), and returns the visit's error for it.
func (c *Client) visitPanicked(ctx context.Context, mode driveMode, p any, open bool, attrs []slog.Attr) error {
	c.log.LogAttrs(ctx, slog.LevelError, "idem: "+callKind(mode)+": a visit panicked",
		append(attrs, slog.Bool("open", open), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))...)
	return fmt.Errorf("%w: %v", errCallPanicked, p)
}

// run returns why the call ended without settling (nil when it settled).
func (d *driver) run() error {
	c := d.c
	if !d.rec.Open() {
		return nil
	}
	if d.mode == reconciling {
		if c.pastDeadline(d.rec, d.now()) {
			return d.flag(ReviewDeadlinePassed, ErrBudgetSpent)
		}
	}
	// A flagged operation is only ever queried by the reconciler.
	needQuery := d.reviewOnly() || (!d.preRecorded && pastOf(d.rec, math.MaxInt).maybeExecuted)
	var wait time.Duration
	if d.mode != reconciling && !d.preRecorded {
		// Do and Resume start whatever the operation's NextDue says: a
		// server's wait an earlier call (or process) read is still the
		// server's, waited out or handed off like one read now.
		now := d.now()
		if until := c.journaledRest(d.rec, now); !until.IsZero() {
			wait, d.serverUntil = until.Sub(now), until
		}
	}
	for {
		if wait > 0 {
			if err := d.sleep(wait); err != nil {
				return err
			}
			wait = 0
		}
		if d.ctx.Err() != nil {
			return d.leave(context.Cause(d.ctx))
		}
		// One reading of the clock for this round's checks: nothing in
		// between waits.
		now := d.now()
		if d.exchanges+d.refusedProbes >= c.cfg.maxAttempts || !now.Before(d.deadline) {
			return d.handoff(d.budgetSpent(), time.Time{})
		}
		// What was sent before this round: not the attempt Submit
		// journaled with the record, yet to go. Counted, it made a first
		// send look like a resend of a key that may have executed, and a
		// clock stepped back just after Submit's commit flagged an order
		// never sent for a person, which Resume and Run never send.
		p := d.sentBefore()
		block := d.resendBlock(p, now)
		if block != nil && block.reason == ReviewKeyIgnored {
			d.ignoredEndpoint = true
		}
		if block != nil && block.reason == "" {
			if d.ctx.Err() != nil {
				return d.leave(context.Cause(d.ctx)) // while the journal's flags were read
			}
			// Not now, and not even a query: its attempt would be
			// journaled at a time the clock, put right, finds in the
			// future, and the window could never be judged again.
			return d.handoff(block.cause, time.Time{})
		}
		// Only a key that may have executed for us can hold our result: a
		// query before that would read someone else's. Nor can the attempt
		// journaled with the record (preRecorded), not sent yet: the query
		// would close it as "may have been sent" and the submit after it
		// would go on the query's attempt, unjournaled.
		if (needQuery || block != nil || queryOnly(d.rec)) && d.rec.QueryURL != "" && !d.preRecorded && p.maybeExecuted {
			if !d.mayRetry() {
				return d.handoff(ErrRetryBudgetEmpty, time.Time{})
			}
			if d.rec.Review == ReviewKeyIgnored && !d.ignoringKept {
				// The flag may be all that tells a restarted process the
				// endpoint ignores the key (its save failed, or was lost
				// to a kill), and the query's settlement clears it: the
				// next process resent another payment there whose answer
				// was lost, a second charge. Journaled first, once the
				// save relearn started has ended, as Confirm does; on a
				// Store that keeps none, the endpoint's other open
				// operations that may have executed flagged first
				// (keepFlagged). Neither done, nothing is asked, and the
				// operation stays flagged for the next visit.
				if _, err := c.keepFlagged(d.ctx, d.rec); err != nil {
					return d.flagUnjournaled(err)
				}
				d.ignoringKept = true
			}
			if err := d.hold(now, c.cfg.attemptTimeout); err != nil {
				return err
			}
			q, err := d.query()
			if err != nil {
				return err
			}
			switch q.move {
			case moveSettle:
				return nil
			case moveReview:
				cause := errKeyInUse
				switch q.review {
				case ReviewKeyExpired:
					cause = ErrKeyExpired
				case ReviewKeyIgnored:
					// An endpoint that reads no key holds none for another.
					cause = ErrNeedsReview
				}
				return d.flag(q.review, cause)
			case moveProcessing, moveResend:
				if wait, err = d.next(q.retryAfter); err != nil {
					return err
				}
				continue
			}
			// Inconclusive: "not found" is not "never happened".
			if d.awaitsRun {
				// The endpoint said the payment runs: its read path may
				// not have it yet, as for a request in flight.
				if wait, err = d.next(q.retryAfter); err != nil {
					return err
				}
				continue
			}
			if block != nil && p.orderPaid {
				if block.reason != ReviewKeyIgnored && keyWindow(d.rec, p, d.now(), resendWindow(c.keyRetention(d.rec))) == windowUntrusted {
					// A time journaled in the clock's future: once the
					// clock has caught up, FirstSent, read by a clock that
					// ran fast, would make the key look younger than it
					// is, and the endpoint's "not found" fail a payment
					// the server may have forgotten with the key
					// (orderPaidNotFoundWithin). Flagged for good, as
					// resends flag it (resendBlock). Read after the
					// query's commit: the round's reading would find the
					// query's own attempt in its future after a slow
					// lease renewal or journal read.
					return d.flag(ReviewClockStepped, orderPaidError(d.rec))
				}
				if q.notFound && !q.failed && block.reason != ReviewKeyIgnored {
					// Lagging (query settles it once the lag is past):
					// asked again then, by Resume or Run.
					return d.handoff(orderPaidError(d.rec), now.Add(c.cfg.resultLag))
				}
				return d.flag(block.reason, orderPaidError(d.rec))
			}
			if block != nil {
				return d.flag(block.reason, block.cause)
			}
			if queryOnly(d.rec) || c.cfg.keyHeader == "" && (q.failed ||
				c.lagging(d.rec, now)) {
				// With the key in the body, it is a client order id, which
				// many exchanges hold only while its order is open
				// (Binance's newClientOrderId): a resend after the order
				// filled places it again. Only the endpoint's answer about
				// the order lets a resend go; a failed query is asked again.
				// Nor is "not found" such an answer until the read path
				// has had time to catch up with the last send
				// (WithResultLag: Binance's -2013 for an order it placed
				// up to a minute ago).
				if wait, err = d.next(q.retryAfter); err != nil {
					return err
				}
				continue
			}
			// Resend with the same key: the server de-duplicates it.
			// A caller backs off first, even after a 404: the answer
			// that sent us here was a failure, and a server answering
			// 500 to every submit must not get one resend per round
			// trip. Resume and the reconciler resend at once after a 404
			// (their visits are spaced, and a restart must settle a
			// backlog fast), or after any answer of the endpoint's server
			// that tells nothing (answered): every visit of the
			// reconciler queries first, so one that rescheduled on a
			// result endpoint refusing its credentials (401, 403) or
			// failing (500) never resent, and every such operation was
			// left to a person once its key window passed, though the
			// submit endpoint would have replayed its result. They
			// reschedule when the endpoint gets no answer (its server
			// may be down). Only a visit's first submit goes at once:
			// once this visit's own submit has failed, the wait (which
			// the reconciler never takes) reschedules the operation
			// rather than send maxAttempts requests back to back.
			needQuery = false
			if !(q.notFound || d.answered()) || d.mode == foreground || d.submits > 0 {
				if wait, err = d.next(q.retryAfter); err != nil {
					return err
				}
			}
			continue
		}
		if block != nil && p.orderPaid {
			return d.flag(block.reason, orderPaidError(d.rec))
		}
		if block != nil {
			return d.flag(block.reason, block.cause)
		}
		if d.mayAwaitProbe(p) {
			waited, err := d.awaitProbe(now)
			if err != nil {
				return err
			}
			if waited {
				if d.probeRefused {
					// In place of the resend, which would have been
					// refused as fast: its backoff, then the host's clock
					// is asked again.
					d.probeRefused = false
					if wait, err = d.next(0); err != nil {
						return err
					}
				}
				continue // judged again, by the host's clock if it is learnt now
			}
		}
		if !d.preRecorded && !d.mayRetry() {
			return d.handoff(ErrRetryBudgetEmpty, time.Time{})
		}
		if err := d.hold(now, c.cfg.attemptTimeout); err != nil {
			return d.unheld(err)
		}
		s, err := d.submit()
		if err != nil {
			return err
		}
		switch s.move {
		case moveSettle:
			if s.conflict {
				return ErrKeyConflict
			}
			return nil
		case moveReview:
			// Flagged in the submit's own commit; a result endpoint may
			// still settle it, so the loop queries before it ends.
			d.reviewed, d.awaitsRun = true, s.awaits
			continue
		case moveProcessing:
			needQuery = true
		case moveResend:
			// A 503 may follow the work done (a gateway's, an overloaded
			// exchange's: Binance's -1008). A header key's server takes the
			// resend for the same request; a client order id in the body
			// may be free again once the order has filled: ask first.
			needQuery = !s.refused && c.cfg.keyHeader == ""
		case moveQuery:
			needQuery = true
			if d.rec.QueryURL != "" && s.retryAfter == 0 {
				continue // ask at once: the answer is likely there already
			}
		}
		if wait, err = d.next(s.retryAfter); err != nil {
			return err
		}
	}
}

// queryOnly reports whether rec is only ever asked about, never resent:
// the server said it holds the request (processing: a 202, a 409 for our
// key in flight, or the result endpoint's own "processing"), and a result
// endpoint will say how it ends. The journal's state says so, so a
// restart (Resume, Run) keeps to it. A resend could tell nothing the
// endpoint will not, and it is safe only while the server still holds
// the key; whether it does, no answer of the endpoint's proves: a 404 may
// be a replica behind, or an idempotency store that lost the key (an
// in-memory store restarted, Redis evicting under maxmemory); a 401, 403
// or 500 later says nothing either way. To a server that lost it, a
// resend is a second order. Without a result endpoint the resend is the
// only question there is (a Stripe-style server replays the key's
// answer), and it is asked.
func queryOnly(rec *journal.Record) bool {
	return rec.State == StateProcessing && rec.QueryURL != ""
}

// answered reports whether rec's last exchange (the query just made) got
// an answer from its server: not none, nor a gateway's or an unavailable
// server's (silentStatus).
func (d *driver) answered() bool {
	n := len(d.rec.Attempts)
	return n > 0 && d.rec.Attempts[n-1].Done && !silentStatus(d.rec.Attempts[n-1].Status)
}

// journaledRest is when the wait the server asked for in rec's last
// exchange (429 or 503 with a Retry-After) ends, if that is after now;
// zero otherwise. The attempt holds the wait a caller took, capped by
// WithRetryAfterCap: one at the cap may have been longer, up to the
// reconciler's maximum, and the hand-off that followed scheduled NextDue
// no earlier than its end. An end further ahead than any wait reaches was
// read while the clock ran fast, and is over.
func (c *Client) journaledRest(rec *journal.Record, now time.Time) time.Time {
	n := len(rec.Attempts)
	if n == 0 {
		return time.Time{}
	}
	a := rec.Attempts[n-1]
	if !a.Done || a.RetryAfter <= 0 || a.Status != http.StatusTooManyRequests && a.Status != http.StatusServiceUnavailable {
		return time.Time{}
	}
	end := a.Start.Add(a.Duration)
	until := end.Add(a.RetryAfter)
	if a.RetryAfter >= c.cfg.retryAfterCap && rec.NextDue.After(until) {
		until = minTime(rec.NextDue, end.Add(c.cfg.reconcileMax))
	}
	if !until.After(now) || beyondSlack(until, now, max(c.cfg.reconcileMax, c.cfg.retryAfterCap)) {
		return time.Time{}
	}
	return until
}

// blocked is why the operation must not be resent, and how the call ends
// if no query settles it.
type blocked struct {
	reason string // the review reason; none: not now, handed off unflagged
	cause  error
}

// resendBlock says whether the operation may be resent now; nil if it may.
func (d *driver) resendBlock(p past, now time.Time) *blocked {
	if block := d.flagBlock(p); block != nil {
		return block
	}
	rec := d.rec
	if d.c.cfg.keyHeader == "" && !keyInBody(rec.Key, rec.Body) {
		// Journaled with the key in a header (an earlier release's or
		// deploy's settings), sent by a Client that sends it in the
		// body: the journaled body does not carry it, and the request
		// would carry no key at all, a new order to the server on every
		// copy. Not even a first send: a mesh's retry of a copy that
		// executed (Istio's of an upstream 503), which a key makes a
		// replay, would be a second order.
		return &blocked{ReviewKeyNotCarried, errKeyNotCarried}
	}
	if d.sentBefore().maybeExecuted {
		if !d.keyIgnored {
			// What the journal says of the endpoint, first: an earlier
			// process, or another Client on the journal, may have learnt
			// it (knowsIgnoring).
			if _, err := d.c.knowsIgnoring(d.ctx, d.rec); err != nil {
				if d.ctx.Err() != nil {
					return &blocked{cause: context.Cause(d.ctx)}
				}
				return &blocked{cause: &journalError{err}}
			}
		}
		if d.ignoresKey() {
			// The endpoint does not de-duplicate by the key, learnt from
			// another operation's answer after this one's was lost (its
			// own lost answers are flagged as they come, judgeSubmit):
			// what may have executed would execute again.
			return &blocked{ReviewKeyIgnored, ErrNeedsReview}
		}
	}
	// After ReviewKeyIgnored, which says what the operation's sends may
	// have done (each charged: ReviewMaybeTwice once an event settles
	// it); ReviewKeyMoved, saying only where this Client puts the key,
	// would stand in its place, and the event would settle it clean.
	if block := d.c.keyMovedBlock(rec.KeyPlacement); block != nil {
		return block
	}
	window := resendWindow(d.c.keyRetention(rec))
	if p.contested && !p.maybeExecuted && len(rec.Attempts) > 0 && now.Sub(rec.Attempts[0].Start) >= window {
		// Nothing of ours ever ran, and the key has been someone else's
		// for longer than a server keeps keys: whatever answers it now
		// (a handler's own 409 run again on every resend, once the key is
		// forgotten) will not become ours. The margin too: the request
		// holding the key may have been ours, sent again by a mesh's
		// retry (mesh_retry_test.go), its order made under the key, and
		// a resend the server takes as new is a second order.
		return &blocked{ReviewKeyInUse, errKeyInUse}
	}
	measured, running := d.c.life.run.measuredNow(now)
	switch keyWindow(rec, p, now, window) {
	case windowUntrusted:
		return &blocked{ReviewClockStepped, ErrNeedsReview}
	case windowExpired:
		if running && now.Sub(measured) > clockSlack && keyWindow(rec, p, measured, window) == windowOpen {
			// The clock reads further ahead than Run has measured (it was
			// stepped): expired by it, not by Run's measure. Flagged, the
			// operation would be for a person for good; resent, it would
			// be sent on a window nobody can judge. Neither: the next
			// visit judges it again, by then by a clock put right or by a
			// measure that has caught up.
			return &blocked{cause: errClockAhead}
		}
		return &blocked{ReviewKeyExpired, ErrKeyExpired}
	case windowOpen:
		if running && measured.Sub(now) > clockSlack && keyWindow(rec, p, measured, window) == windowExpired {
			// The clock reads behind what Run has measured (it was
			// stepped back): by Run's measure the server may have
			// forgotten the key, and a resend would order again.
			return &blocked{ReviewClockStepped, ErrNeedsReview}
		}
		if !p.maybeExecuted {
			break // nothing a forgotten key could make twice
		}
		if !d.c.sentEarlier(rec) {
			// First sent by this process: judged by our clock alone,
			// since a host whose clock merely runs ahead of ours must
			// not cut the window short; but not by a wall clock stepped
			// back since the send (chrony's makestep or ntpd -g putting
			// right a clock fast at boot), which makes the key look
			// younger than it is, and which Run's measure catches only
			// after its first hour: by the time this process has lived
			// (wallSteps) the server may have forgotten it. Not for the
			// attempt journaled with the record (preRecorded), which is
			// no resend: a first send takes no lock to read the steps.
			if d.preRecorded {
				break
			}
			steps := d.c.wallView(now)
			back := steps.stepBackSince(rec.FirstSent)
			if back > clockSlack && keyWindow(rec, p, now.Add(back), window) == windowExpired {
				return &blocked{ReviewClockStepped, ErrNeedsReview}
			}
			// Nor by a clock that lost time no reading of ours shows (a
			// VM paused: hostGains), which the host's clock, gaining on
			// ours by its answers' Dates, does: by the host's time the
			// key may be forgotten. A host merely ahead of us gains
			// nothing.
			if gain := d.c.hostGain(rec, back); gain > clockSlack && keyWindow(rec, p, now.Add(gain), window) == windowExpired {
				return &blocked{ReviewClockStepped, ErrNeedsReview}
			}
			break
		}
		if srv, ok := d.c.serverNow(rec, now); ok && srv.Sub(now) > clockSlack && keyWindow(rec, p, srv, window) == windowExpired {
			// Journaled by an earlier process, and the host's clock, by
			// its last answer's Date, reads ahead of ours: ours may have
			// been stepped back since (a VM restored from a snapshot, a
			// wrong RTC at boot) with nothing journaled left in its
			// future, and the server counts the window by its own. By
			// its time it may have forgotten the key: a resend would be
			// a second order.
			return &blocked{ReviewClockStepped, ErrNeedsReview}
		}
	}
	return d.reviewOnlyBlock()
}

// flagBlock is resendBlock's judgement by the journal's flags and p
// alone: what no clock, measure or read of the journal decides, so that
// submit can judge the record its commit read back again at no cost
// (another process's Confirm may have flagged it since resendBlock).
func (d *driver) flagBlock(p past) *blocked {
	rec := d.rec
	switch {
	case p.final || d.reviewed || rec.Review == ReviewKeyInUse || rec.Review == ReviewKeyIgnored || rec.Review == ReviewMadeTwice ||
		rec.Review == ReviewConfirmConflict:
		// The server's stored answer for the key is final, or this call
		// has just flagged it: resending changes nothing. Nor is a key the
		// server ignores ever safe to resend, nor one it has lost once:
		// made twice, or an event naming another payment for the key
		// than the one recorded (ReviewConfirmConflict on an open
		// operation), which only a server that lost the key makes.
		reason := rec.Review
		if reason == "" {
			reason = ReviewFinalAnswer
		}
		cause := ErrNeedsReview
		if reason == ReviewKeyInUse {
			cause = errKeyInUse
		}
		return &blocked{reason, cause}
	}
	if rec.Review == ReviewKeyExpired {
		// Expiry is for good, whether the client's window or the server's
		// own answer (a 410 from the result endpoint) said so; a later 404
		// from the endpoint must not reopen it.
		return &blocked{ReviewKeyExpired, ErrKeyExpired}
	}
	if p.orderPaid {
		// "Order already paid" to a send of ours (orderPaidMeaning): the
		// server refuses a resend so forever, and a copy of ours may have
		// paid. Never resent, by a caller's Do or Submit either; only
		// queried. From an endpoint since known to ignore the key, the
		// result endpoint's "not found" settles nothing (driver.query):
		// flagged as the endpoint's.
		if d.ignoresKey() {
			return &blocked{ReviewKeyIgnored, ErrNeedsReview}
		}
		return &blocked{ReviewRefusedAfterSend, ErrNeedsReview}
	}
	return nil
}

// ignoresKey reports whether the endpoint is known not to de-duplicate
// by the key: by this call's answers or by what this process learnt.
func (d *driver) ignoresKey() bool {
	return d.keyIgnored || d.c.ignoring.has(d.rec)
}

// reviewOnlyBlock blocks a resend by automatic reconciliation of a
// flagged operation (reviewOnly); nil otherwise.
func (d *driver) reviewOnlyBlock() *blocked {
	if d.reviewOnly() {
		return &blocked{d.rec.Review, ErrBudgetSpent}
	}
	return nil
}

// mayAwaitProbe reports whether the resend about to go may have to wait
// for its host's probe (awaitProbe): this drive's first resend of an
// operation that may have executed. A first send, and a drive that has
// resent or waited already, never wait; the test costs nothing else. A
// drive whose probe was refused has neither resent nor waited: it asks
// again (refusedProbe).
func (d *driver) mayAwaitProbe(p past) bool {
	return !d.preRecorded && d.submits == 0 && !d.probeWaited && p.maybeExecuted
}

// awaitProbe holds back a resend the host's clock cannot judge yet until
// the host's clock has been asked. The operation was first sent by an
// earlier process, whose clock may have read otherwise than ours
// (resendBlock judges its key window by the host's clock too), and no
// answer from the host has taught its clock since this process started
// (no result endpoint, or a query that got none). Resume's first visits
// to a host, up to WithResumeConcurrency at once, went unjudged: after a
// clock stepped back (a VM restored from a snapshot), each a second order
// on a key the server had forgotten; and a resend sent to learn the
// clock is one such order itself. The first of them asks instead, with
// a request that cannot execute anything (headProbe), while the others
// wait (waited) until it is over or an answer's Date teaches the host's
// clock; then all of them, the asking one too, are judged again. A host
// that never answers thus costs one attempt timeout at start-up, not one
// per operation, and none of the resends is sent while its probe has
// timed out (unasked): a later one asks again an attempt timeout later
// (serverClocks.unanswered); nor after it was refused, when a caller
// waits its backoff and asks again, and Resume and Run hand the
// operation off (refusedProbe). Waiting is bounded by two attempt
// timeouts (a probe still out then is one that timed out), and ends
// with ctx. The lease is held for the wait first: a
// takeover meanwhile is seen by the next write.
//
// A host's clock learnt since resendBlock judged the resend (another
// drive's answer came in between) has it judged again too: waited, once.
func (d *driver) awaitProbe(now time.Time) (waited bool, err error) {
	if !d.c.sentEarlier(d.rec) {
		return false, nil // this process's own: judged by our clock alone
	}
	u, perr := d.c.parsedURL(d.rec.URL)
	if perr != nil {
		return false, nil
	}
	if _, ok := d.c.clocks.now(u.Host, now); ok {
		d.probeWaited = true
		return true, nil
	}
	first, over := d.c.clocks.firstProbe(u.Host, now)
	if first {
		if err := d.hold(now, d.c.cfg.attemptTimeout); err != nil {
			d.c.clocks.probed(u.Host, false)
			return false, err
		}
		end := d.c.headProbe(d.ctx, u, d.c.clocks.rootNext(u.Host))
		switch {
		case d.ctx.Err() != nil:
			// Ended by this drive's context (a Resume given up, Close),
			// the probe says nothing of the host: it is given up, and
			// the next resend to the host asks again. A HEAD repeated is
			// harmless; the waiters going on a clock nothing taught is
			// not.
			d.c.clocks.probed(u.Host, false)
		case end == probeFailed:
			// Refused at once: the next resend asks again, or every visit
			// under way when the host is back would go unjudged at once;
			// this one too (unasked).
			d.c.clocks.unanswered(u.Host, time.Time{})
			return d.unasked(u.Host, true)
		case end == probeTimedOut:
			// Silent, or slower than the attempt timeout: the resends wait
			// (unasked), and a later one asks again, not before another
			// attempt timeout has passed, so that a host silent for long
			// costs one attempt timeout at most per attempt timeout.
			d.c.clocks.unanswered(u.Host, d.now().Add(d.c.cfg.attemptTimeout))
			return d.unasked(u.Host, true)
		default:
			d.c.clocks.probed(u.Host, true)
		}
		d.probeWaited = true
		return true, nil
	}
	if over == nil {
		return d.unasked(u.Host, false)
	}
	bound := addSat(d.c.cfg.attemptTimeout, d.c.cfg.attemptTimeout)
	if err := d.hold(now, bound); err != nil {
		return false, err
	}
	// Real time, as the probe's attempt timeout is: the Client's clock
	// may not move while it waits.
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-over:
		// A probe given up taught nothing: this resend asks again, and
		// may become the probe.
		d.probeWaited = d.c.clocks.probeDone(u.Host, over)
		if d.probeWaited {
			if _, err := d.unasked(u.Host, true); err != nil {
				return false, err
			}
		}
	case <-t.C:
		// A probe that outlasts its bound ended without saying so (a
		// transport that ignores its context): taken as over, or every
		// later resend to the host would wait as long; and as one that
		// timed out, for it taught nothing: the resends behind it wait
		// until the host is asked again (unasked). Taken for answered,
		// this one went on our clock alone, a second order on a key
		// the server had forgotten, while the probe was still out.
		d.c.clocks.unanswered(u.Host, d.now().Add(d.c.cfg.attemptTimeout))
		d.probeWaited = true
		if _, err := d.unasked(u.Host, true); err != nil {
			return false, err
		}
	case <-d.ctx.Done():
	}
	return true, nil
}

// unasked hands the operation off, due when its host's clock may be asked
// again, if the clock is still unknown and the probe asking it timed out
// (serverClocks.silent): the host may be slow rather than gone, and a
// resend it took on a clock nothing taught would be a second order on a
// key it has forgotten. A host silent at start-up thus costs one attempt
// timeout, and none of the resends behind its probe is sent, however late
// its turn comes (a stalled process, a paused VM): past the time the host
// may be asked again, it is handed off due at once, and its next turn asks.
//
// A clock learnt meanwhile (another drive's probe or answer, since
// resendBlock judged the resend by ours alone) has the resend judged
// again (waited): going on as judged, it was a second order on a key the
// server had forgotten whenever another visit's probe was answered
// between this one's look at the clock and its turn (a Run's visits
// racing after an outage).
//
// behind: the resend was behind a probe that has just ended, its own or
// one it waited on. If the host has been asked again since (another
// call's probe, its turn come once the host may be asked again, took the
// timeout's mark off), the resend waits for that probe, or is judged by
// its answer, as the resends behind any probe are (awaitProbe again, not
// waited). Taken for a host never silent, it went on our clock alone
// while the probe that would have judged it was still out: a second
// order on a forgotten key. A probe refused at once, the host asked by
// no resend since, holds it back too (refusedProbe); one answered with
// no Date lets it go as judged.
func (d *driver) unasked(host string, behind bool) (waited bool, err error) {
	now := d.now()
	if _, ok := d.c.clocks.now(host, now); ok {
		d.probeWaited = true
		return true, nil
	}
	until, ok, asked := d.c.clocks.silent(host)
	if ok {
		d.silentHost = true
		return false, d.handoff(errHostSilent, maxTime(until, now))
	}
	if !asked {
		return d.refusedProbe(now)
	}
	if behind {
		d.probeWaited = false
		return true, nil
	}
	return false, nil
}

// refusedProbe holds back a resend whose host's clock is unknown and
// whose last probe was refused at once (serverClocks.unanswered with no
// time), no resend having asked the host since. Taken as a refusal the
// resend would meet as fast, it let the resend go by our clock alone: a
// host back by then (the last moment of a restart), or by the caller's
// next retry, which never asked again (mayAwaitProbe), took it as a
// second order on a key it had forgotten. A caller waits the backoff a
// refused resend waits, the probe counted as the exchange it stands in
// for, and asks the host's clock again; Resume and Run, which have other
// operations to visit, hand it off, as after a probe that timed out
// (unasked), rather than have each visit wait a backoff, and their next
// visit asks.
func (d *driver) refusedProbe(now time.Time) (waited bool, err error) {
	if d.mode == foreground {
		d.refusedProbes++
		d.probeWaited, d.probeRefused = false, true
		return true, nil
	}
	d.silentHost = true
	return false, d.handoff(errHostRefused, now)
}

// budgetSpent is the cause a call ends with once its attempts are used
// up. A last submit the request hook changed, and attempts that went to
// clock probes the host refused, are named: a bare "budget spent" after
// no send of this call reads as a bug.
func (d *driver) budgetSpent() error {
	if d.hookChanged != nil {
		return fmt.Errorf("%w: %s", ErrBudgetSpent, strings.TrimPrefix(d.hookChanged.Error(), "idem: "))
	}
	if d.refusedProbes == 0 {
		return ErrBudgetSpent
	}
	return fmt.Errorf("%w: %d of its attempts were clock probes the host refused (its clock is asked before an earlier process's order is resent; the reconciler, Client.Run or Resume, resends once it answers)", ErrBudgetSpent, d.refusedProbes)
}

// sentBefore is the past of the attempts sent before this round: not the
// one Submit journaled with the record, which is yet to go.
func (d *driver) sentBefore() past {
	before := math.MaxInt
	if n := len(d.rec.Attempts); d.preRecorded && n > 0 {
		before = d.rec.Attempts[n-1].Number
	}
	return pastOf(d.rec, before)
}

// reviewOnly: automatic reconciliation (Resume, Run) has given up
// resending this operation; it still asks the result endpoint, which may
// settle it. Only an explicit Do may resend it, inside the key window.
func (d *driver) reviewOnly() bool {
	return d.mode != foreground && d.rec.Review != "" && !d.c.movedHere(d.rec)
}

// mayRetry consults the retry budget of the operation's host. Only callers' retries
// do: an operation's very first attempt never does, and neither do Resume
// and the reconciler. Their own bounded concurrency and spaced schedule
// are their throttle; a restart after an outage must settle its backlog,
// not leave it to wait for callers' successes to refill the bucket (with
// no new traffic, nothing else would).
func (d *driver) mayRetry() bool {
	if attemptCount(d.rec) == 0 || d.mode != foreground {
		return true
	}
	return d.c.budget.allowRetry(d.c.hostOf(d.rec))
}

func (d *driver) now() time.Time { return d.c.cfg.clock.Now() }

// next is the wait before the next attempt: the backoff, never shorter than
// the server's (already capped) Retry-After.
func (d *driver) next(retryAfter time.Duration) (time.Duration, error) {
	if d.bo == nil {
		d.bo = d.c.cfg.newBackoff()
	}
	b := d.bo.NextBackOff()
	if b == backoff.Stop {
		return 0, d.handoff(d.budgetSpent(), time.Time{})
	}
	return max(b, retryAfter), nil
}

// sleep waits, unless the wait outlives the call's budget: then the
// operation is handed to the reconciler, due when the wait would end. The
// reconciler itself never sleeps on an operation.
func (d *driver) sleep(wait time.Duration) error {
	now := d.now()
	if d.mode != reconciling && d.exchanges+d.refusedProbes >= d.c.cfg.maxAttempts {
		// No attempt follows a wait after the last one: the caller would
		// be held for nothing, up to the Retry-After cap. The operation
		// goes to the reconciler as it would have after the wait: on
		// the reconciler's own, longer schedule, which the retry budget
		// does not throttle, and not before the wait ends.
		return d.handoff(d.budgetSpent(), maxTime(now.Add(wait), now.Add(d.c.reconcileDelay(d.rec))))
	}
	if d.brief && d.rec.State == StateProcessing {
		// Accepted and still at work, on a host whose work takes longer
		// than a visit (a bank debit processes for days): nobody waits for
		// it, and start-up waits for Resume. Run asks again on its own
		// schedule, as it does after each of its visits.
		return d.handoff(d.budgetSpent(), maxTime(now.Add(wait), now.Add(d.c.reconcileDelay(d.rec))))
	}
	if d.mode == reconciling || !now.Add(wait).Before(d.deadline) {
		return d.handoff(d.budgetSpent(), now.Add(wait))
	}
	// Saturated: a wait of centuries (WithMaxElapsed and a backoff of
	// "no limit") plus the timeout would wrap to a lease already covered.
	if err := d.hold(now, addSat(wait, d.c.cfg.attemptTimeout)); err != nil {
		return err
	}
	if d.c.cfg.clock.Sleep(d.ctx, wait) != nil {
		return d.leave(context.Cause(d.ctx))
	}
	return nil
}

// commit applies fn to the journaled record. Every state change goes
// through here, so the caller learns nothing that is not on disk.
func (d *driver) commit(fn func(r *journal.Record)) error {
	return d.commitChange(fn, nil)
}

// commitEnd is commit(end.apply), the submit's end, costing one
// allocation less: the store's fn is end's write, not a closure of
// commit's own over end.apply and the time (TestSubmitAllocations).
func (d *driver) commitEnd(end *submitEnd) error {
	return d.commitChange(nil, end)
}

// commitChange is commit of fn, or of end.apply when end is not nil. The
// store's fn applies the change, stamps Updated with the time read here
// and compacts the attempts, in that order, whichever is given.
func (d *driver) commitChange(fn func(r *journal.Record), end *submitEnd) error {
	if d.leaseLost {
		return &leaseLostError{journal.ErrLeaseLost}
	}
	if end != nil && d.ignoredEndpoint {
		fn, end = end.apply, nil
	}
	if d.ignoredEndpoint {
		fn = markIgnored(fn)
	}
	now := d.now()
	// Another replica's flag (its Confirm's, its drive's), set since this
	// drive read the record, may be all that tells the next process the
	// endpoint ignores the key (that replica killed before its save):
	// cleared by this write unjournaled, Resume resent another payment
	// there whose answer was lost, a second charge. Such a write writes
	// nothing (journal.ErrFlaggedKeyIgnored) and is made again once the
	// endpoint is journaled (keepUnreadFlag).
	var write func(r *journal.Record) error
	if end != nil {
		// Set before the store may call write, and never again: end is
		// this commit's alone.
		end.updated, end.unread = now, d.unreadFlag()
		write = end.write
	} else {
		write = func(r *journal.Record) error {
			// d waits in Update while the store calls this: d.rec holds.
			return writeChange(r, fn, now, d.unreadFlag())
		}
	}
	update := func() (*journal.Record, error) {
		wctx := d.wctx
		if d.lease.Token != 0 {
			wctx = journal.WithLease(wctx, d.lease)
			// The drive's fns never change the record's Body, nor does
			// anything after with the record handed back: the journal
			// need not copy it (internal/owned).
			owned.Mark(wctx)
			// Nor its request's strings and header, which d.rec holds
			// and nothing changes: d waits in Update while they are read.
			owned.Like(wctx, d.rec)
		}
		return d.c.store.Update(wctx, d.rec.Scope, d.rec.Key, write)
	}
	rec, err := adopting(d, update)
	if errors.Is(err, journal.ErrFlaggedKeyIgnored) {
		// Once: a flag set again after the read below fails the write,
		// the operation left open and flagged for the next visit.
		if err = d.keepUnreadFlag(); err == nil {
			if end != nil {
				end.unread = d.unreadFlag()
			}
			rec, err = adopting(d, update)
		} else if journal.FlaggedKeyIgnored(d.rec) {
			// Read flagged, its endpoint not journaled: handed off as a
			// drive that read the flag before its query is, not a
			// journal that works failed as a broken one (Resume's error).
			return d.flagUnjournaled(err)
		}
	}
	if errors.Is(err, journal.ErrMaybeCommitted) && !storeStalled(err) {
		change := fn // not fn itself: a closure's, it would move to the heap
		if end != nil {
			change = end.apply
		}
		rec, err = d.readBack(change, now, err)
	}
	if errors.Is(err, journal.ErrLeaseLost) {
		// Never retried: the operation is another owner's now.
		// An owner that settled it (an operator's resolve -force, which
		// fences this drive) has not seen the answer this write carried:
		// settled elsewhere, it is checked against that outcome
		// (lateAnswer) instead of dropped.
		return d.settledElsewhere(d.lost(err))
	}
	if errors.Is(err, journal.ErrTerminal) {
		if cur, gerr := d.c.store.Get(d.wctx, d.rec.Scope, d.rec.Key); gerr == nil {
			d.rec = cur
			return errSettledElsewhere
		}
	}
	if err != nil {
		d.journalStalled = storeStalled(err)
		d.c.log.LogAttrs(d.ctx, slog.LevelError, "idem: journal write failed", append(opAttrs(d.rec), slog.Any("err", err))...)
		return &journalError{err}
	}
	d.rec = rec
	return nil
}

// settledElsewhere is lost, the error of a drive another owner's claim
// fenced, or errSettledElsewhere, d.rec then the record as it is, when
// that owner has settled the operation since: the caller is told its
// outcome, not an unknown one.
func (d *driver) settledElsewhere(lost error) error {
	if cur, err := d.c.store.Get(d.wctx, d.rec.Scope, d.rec.Key); err == nil && !cur.Open() {
		d.rec = cur
		return errSettledElsewhere
	}
	return lost
}

// unreadFlag reports whether a ReviewKeyIgnored flag on the record
// would be one this drive has not read, its endpoint not journaled by it.
func (d *driver) unreadFlag() bool {
	return !d.ignoringKept && !journal.FlaggedKeyIgnored(d.rec)
}

// writeChange is the store's fn of a drive's commit: it applies change
// to r, stamps Updated with now and compacts the attempts, unless change
// takes r from flagged ReviewKeyIgnored to anything else while the flag
// is unread (driver.unreadFlag): then it returns
// journal.ErrFlaggedKeyIgnored, and the store writes nothing.
func writeChange(r *journal.Record, change func(r *journal.Record), now time.Time, unread bool) error {
	flagged := unread && journal.FlaggedKeyIgnored(r)
	change(r)
	if flagged && !journal.FlaggedKeyIgnored(r) {
		return journal.ErrFlaggedKeyIgnored
	}
	r.Updated = now
	compactAttempts(r)
	return nil
}

// keepUnreadFlag reads the record again after a write refused for a
// ReviewKeyIgnored flag this drive had not read (commitChange) and, if
// it is flagged so still, journals its endpoint (keepFlagged), as a drive
// that read the flag does before its query. Within wctx until the
// attempt timeout after the caller's context ends (outlastCaller): the
// refused write is the outcome's commit, which a caller that gave up
// still gets (a final 201 left unjournaled, the operation stayed open and
// flagged for a person).
func (d *driver) keepUnreadFlag() error {
	cur, err := d.c.store.Get(d.wctx, d.rec.Scope, d.rec.Key)
	if err != nil {
		return err
	}
	d.rec = cur
	if !journal.FlaggedKeyIgnored(cur) {
		return nil
	}
	kctx, cancel := d.outlastCaller()
	defer cancel()
	if _, err := d.c.keepFlagged(kctx, cur); err != nil {
		return err
	}
	d.ignoringKept = true
	return nil
}

// outlastCaller is wctx ended the attempt timeout after the caller's
// context (d.ctx) ends, never before: a caller that gave up waits that
// long at most, but a caller still waiting (Run's pass, a caller whose
// deadline is further off than one exchange's) is not cut short by a
// bound on one exchange while the journal is slow (a failover), its
// answer's commit left undone as if it had given up. cancel ends it and
// the goroutine that would.
func (d *driver) outlastCaller() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(d.wctx)
	bound := d.c.cfg.attemptTimeout
	stop := context.AfterFunc(d.ctx, func() {
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}

// flagUnjournaled ends a visit whose keepFlagged failed with err, the
// operation left open and flagged. A full or refused journal of
// endpoints is the journal working: no reason to stop Run's pass or fail
// Resume (journalError). The flag stays, for a person or for a visit
// once room is made (an endpoint too long to journal never is). Not
// visited again at the reconcile delay, which no attempt lengthens: each
// visit read every endpoint and made an fsync'd commit, every 30 s, for
// ever.
func (d *driver) flagUnjournaled(err error) error {
	if d.ctx.Err() != nil {
		return d.leave(context.Cause(d.ctx))
	}
	if errors.Is(err, journal.ErrKeyIgnoringFull) || errors.Is(err, journal.ErrInvalid) {
		recheck, what := min(d.c.cfg.reconcileMax, reviewRecheck), "until room is made (idem key-ignoring remove, ForgetKeyIgnoring), which Resolve needs too"
		if errors.Is(err, journal.ErrInvalid) {
			recheck, what = reviewRecheck, "and no visit will ask it: settle it by hand (Resolve)"
		}
		return d.handoff(errorf("idem: the operation stays flagged for review, its result endpoint unasked %s: %w", what, err), d.now().Add(recheck))
	}
	return d.handoff(&journalError{err}, time.Time{})
}

// markIgnored is fn that first flags ReviewKeyIgnored an open record not
// flagged yet, or flagged only ReviewKeyMoved (ignoredUnflagged): its
// endpoint was learnt to ignore the key from another operation's answer
// after its own sends' answers were lost, and the drive blocked it
// (resendBlock). Unflagged, the journal would not say
// why it is never resent: what settles it later (this drive's result
// query, a confirmation, after a handoff or a restart) would settle it
// clean, where two lost sends may have executed twice (ReviewMaybeTwice),
// and a restarted process would not learn the endpoint from it
// (keyIgnoring.relearn).
func markIgnored(fn func(r *journal.Record)) func(r *journal.Record) {
	return func(r *journal.Record) {
		if r.Open() && ignoredUnflagged(r) {
			r.Review = ReviewKeyIgnored
		}
		fn(r)
	}
}

// readBack reads the record again after a write whose commit may have
// taken effect (err: journal.ErrMaybeCommitted, as when the connection to
// PostgreSQL broke after the COMMIT was sent). If the journal holds
// exactly what fn made of the record this drive read, the write
// committed, and the drive goes on as if it had answered: stopped there,
// it would report a settlement it wrote to nobody, since Run never visits
// a settled operation again (an outbox operation's only report is the
// settle func). If it holds the operation settled by someone else
// instead, journal.ErrTerminal, as the commit would have answered had it
// come after. Otherwise, or if the record cannot be read, err: the drive
// stops, and Run settles the operation later.
func (d *driver) readBack(fn func(r *journal.Record), now time.Time, err error) (*journal.Record, error) {
	cur, gerr := d.c.readAgain(d.ctx, d.wctx, d.rec.Scope, d.rec.Key)
	if gerr != nil {
		return nil, err
	}
	want := journal.CloneRecord(d.rec)
	fn(want)
	want.Updated = now
	compactAttempts(want)
	if !bytes.Equal(journal.EncodeRecord(nil, cur), journal.EncodeRecord(nil, want)) {
		if d.rec.Open() && !cur.Open() {
			// Settled by someone else (a confirmation, Resolve) while
			// this write's fate was unknown: as if the commit had found
			// it so (ErrTerminal), so that the answer this write carried
			// is compared with that outcome (lateAnswer), not dropped
			// with the journal saying "failed" over a charge.
			return nil, journal.ErrTerminal
		}
		return nil, err
	}
	return cur, nil
}

// readAgain reads a record after a write whose COMMIT's answer was lost.
// The connection broke, often because the database is restarting or
// failing over, so a read that fails is tried again, a little later each
// time, for up to the attempt timeout or until ctx ends; wctx is the
// reads'. A read the Store gave up waiting for (storeStalled) is not: the
// database that does not answer would hold each as long.
func (c *Client) readAgain(ctx, wctx context.Context, scope, key string) (*journal.Record, error) {
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(readAgainFirst),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(c.cfg.attemptTimeout),
		backoff.WithClockProvider(c.cfg.clock),
	)
	bo.Reset()
	for {
		rec, err := c.store.Get(wctx, scope, key)
		if err == nil || errors.Is(err, journal.ErrNotFound) || storeStalled(err) {
			return rec, err
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop || c.cfg.clock.Sleep(ctx, wait) != nil {
			return nil, err
		}
	}
}

// readAgainFirst is readAgain's first wait: a failover takes seconds, a
// dropped connection's replacement milliseconds.
const readAgainFirst = 50 * time.Millisecond

// closeOpenAttempts closes attempts left without an outcome by a process
// that stopped mid-attempt. Nobody knows whether they reached the server,
// so they count as written: maybeExecuted must keep seeing them, or a later
// cancellation could leave a performed operation "pending, never sent".
func closeOpenAttempts(r *journal.Record) {
	for i := range r.Attempts {
		if !r.Attempts[i].Done {
			r.Attempts[i].Done = true
			r.Attempts[i].Wrote = true
			r.Attempts[i].Err = "no outcome recorded: the process stopped mid-attempt; may have been sent"
		}
	}
}

// notSent is the Err of an attempt closeUnsent closed.
const notSent = "not sent: the call ended before sending it"

// closeUnsent closes the attempt journaled and not sent (unsentAttempt:
// Submit's, or one blockSince withheld) when the call ends. Left open, it
// would read as "may have been sent" for ever (maybeExecuted,
// closeOpenAttempts): the operation reported unknown rather than pending,
// and a later refusal never taken as final. n is unsentAttempt's answer,
// taken before the commit: fn must only change the record.
func closeUnsent(r *journal.Record, n int) {
	if n == 0 {
		return
	}
	for i := range r.Attempts {
		if a := &r.Attempts[i]; a.Number == n && !a.Done {
			a.Done, a.Wrote = true, false
			a.Err = notSent
		}
	}
}

// closedUnsent reports whether closeUnsent closed a: no exchange, so
// nothing of its host either (reachOf, lastHostExchange).
func closedUnsent(a journal.Attempt) bool {
	return a.Kind == journal.AttemptSubmit && a.Done && !a.Wrote && a.Err == notSent
}

// unsentAttempt is the number of the attempt journaled with the record and
// not sent yet, or 0.
func (d *driver) unsentAttempt() int {
	if !d.preRecorded {
		return 0
	}
	return attemptCount(d.rec)
}

// handoff ends the call without an outcome and leaves the operation due for
// the reconciler at due (zero: its usual schedule).
func (d *driver) handoff(cause error, due time.Time) error {
	now := d.now()
	if due.IsZero() || d.mode == reconciling {
		due = maxTime(due, now.Add(d.c.reconcileDelay(d.rec)))
	}
	due = maxTime(due, d.serverUntil)
	unsent := d.unsentAttempt()
	if err := d.commit(func(r *journal.Record) {
		closeUnsent(r, unsent)
		// What surely never reached the server stays pending, as leave
		// keeps it: "unknown" is for what may have executed.
		if r.State != StateProcessing && (r.State != StatePending || pastOf(r, math.MaxInt).maybeExecuted) {
			r.State = StateUnknown
		}
		r.NextDue = due
	}); err != nil {
		return err
	}
	d.handedOff = true
	level := slog.LevelInfo
	if d.mode == reconciling {
		level = slog.LevelDebug // every unsettled visit: noise at Info
	}
	d.logEnd(level, "idem: handed to the reconciler", cause)
	return cause
}

// leave ends the call because the caller's context is done. It never marks
// the operation failed: what may have been sent becomes unknown, what was
// surely not stays pending.
func (d *driver) leave(cause error) error {
	if d.hookChanged != nil {
		// Else a caller's deadline ends a call whose attempts the hook
		// kept from being sent with no word of why: the journal's
		// attempts alone would say it.
		cause = fmt.Errorf("%w; the last attempt was never sent: %s", cause, strings.TrimPrefix(d.hookChanged.Error(), "idem: "))
	}
	now := d.now()
	unsent := d.unsentAttempt()
	if err := d.commit(func(r *journal.Record) {
		closeUnsent(r, unsent)
		if r.State == StatePending && pastOf(r, math.MaxInt).maybeExecuted {
			r.State = StateUnknown
		}
		// Due at once, but not before the server's Retry-After ends: the
		// wait was the server's, not the caller's, and the reconciler
		// would otherwise resend into the same limit on its next pass.
		r.NextDue = maxTime(now, d.serverUntil)
	}); err != nil {
		return err
	}
	d.logEnd(slog.LevelInfo, "idem: caller stopped waiting", cause)
	return cause
}

// flag parks the operation for a person, still open, still queried: daily,
// or sooner while its result endpoint does not answer (recheckAt).
func (d *driver) flag(reason string, cause error) error {
	now := d.now()
	next := d.recheckAt(now)
	level := slog.LevelWarn
	if d.mode == reconciling && d.wasReview != "" && reviewAfter(d.wasReview, reason) == d.wasReview {
		// A recheck that did not settle it: a person was told when it was
		// flagged, and rechecks come hourly while the server is down. So
		// was one of a flag the commit keeps (held, or outliving the
		// key's expiry: reviewAfter). Judged by the reason before this
		// call (wasReview), not d.rec's, which this call's query may
		// have set already.
		level = slog.LevelDebug
	}
	unsent := d.unsentAttempt()
	if err := d.commit(func(r *journal.Record) {
		closeUnsent(r, unsent)
		// "Processing" seen for a key another request holds was that
		// request's progress, not ours.
		if r.State != StateProcessing || reason == ReviewKeyInUse {
			r.State = StateUnknown
		}
		setReview(r, reason)
		r.NextDue = next
	}); err != nil {
		return err
	}
	d.logEnd(level, "idem: flagged for review", cause)
	return cause
}

// recheckAt is when an operation flagged now is queried next: a day on,
// unless this call's last exchange was a result query that got no answer
// from the server (silentStatus: it is down), or an answer that says
// nothing of it (saidNothing: a maintenance page, a server error, a
// gateway refusing the client's credentials). The endpoint's word is
// still to come then, and the server keeps the key only so long (Stripe:
// 24 hours): rechecked a day after a query lost in an outage of a few
// hours, the operation is first asked about once the key is forgotten,
// and what the endpoint would have settled is left to a person. It is queried on the reconciler's schedule instead (at most
// its maximum interval apart), never before a server's Retry-After ends.
// So is one whose query found nothing (404) just after one that got no
// answer, or none that said anything of it: the first answer of a server
// back from an outage may come from a read path still catching up with
// what it committed before it (a replica behind), and "not found" is not
// "never happened"; asked once more on the schedule, it is rechecked
// daily if it still finds nothing.
func (d *driver) recheckAt(now time.Time) time.Time {
	if n := len(d.rec.Attempts); d.exchanges > 0 && n > 0 {
		a := d.rec.Attempts[n-1]
		if a.Kind == journal.AttemptQuery && a.Done && (silentStatus(a.Status) || saidNothing(a) || a.Status == http.StatusNotFound && d.backFromSilence(n-1)) {
			return maxTime(now.Add(d.c.reconcileDelay(d.rec)), d.serverUntil)
		}
	}
	return now.Add(reviewRecheck)
}

// saidNothing reports whether query a was answered 2xx with a body that
// does not decode to a result: a maintenance page a front end serves over
// the API for the while, or any other page that says nothing of the
// operation; or answered with a server error: an API whose database is
// down answers every request 500 for hours, which silentStatus leaves
// out (a host that answers 500 is there), but which is no word of the
// operation either; or with a refusal of the client's credentials (401,
// 403), which never reached the endpoint: Envoy's JWT filter answers
// every request 401 while the identity provider's keys cannot be fetched
// (envoyproxy/envoy#13705), and an API key refused until the caller
// rotates it is refused for every request. Rechecked a day on, as after
// the endpoint's own word, an operation flagged during such a window was
// first asked about once the key was forgotten.
func saidNothing(a journal.Attempt) bool {
	if a.Status >= 500 || a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden {
		return true
	}
	return a.Status >= 200 && a.Status < 300 && strings.HasPrefix(a.Err, errUndecodable.Error())
}

// backFromSilence reports whether the result query before rec's attempt
// at index i got no answer from its server (silentStatus), or none that
// said anything of the operation (saidNothing).
func (d *driver) backFromSilence(i int) bool {
	for j := i - 1; j >= 0; j-- {
		if a := d.rec.Attempts[j]; a.Kind == journal.AttemptQuery {
			return a.Done && (silentStatus(a.Status) || saidNothing(a))
		}
	}
	return false
}

func (d *driver) logEnd(level slog.Level, msg string, cause error) {
	// Every reconciler visit that does not settle ends here, at Debug:
	// build no attributes for a logger that drops them (the default).
	if !d.c.log.Enabled(d.ctx, level) {
		return
	}
	attrs := append(opAttrs(d.rec), slog.Duration("elapsed", d.now().Sub(d.start)), slog.Int("attempt", attemptCount(d.rec)))
	if d.rec.Review != "" {
		attrs = append(attrs, slog.String("review", d.rec.Review))
	}
	if cause != nil {
		attrs = append(attrs, slog.String("err", cause.Error()))
	}
	d.c.log.LogAttrs(d.ctx, level, msg, attrs...)
}

// reconcileDelay spaces the reconciler's visits: the interval doubles with
// the attempts made, up to the maximum, with jitter so that operations
// handed off together do not come due together.
func (c *Client) reconcileDelay(rec *journal.Record) time.Duration {
	d := c.cfg.reconcileInterval
	for i := 0; i < attemptCount(rec)/2 && d < c.cfg.reconcileMax; i++ {
		if d > c.cfg.reconcileMax/2 {
			// Doubling next to a huge maxInterval would overflow to a
			// negative interval, and rand.N panics on it.
			d = c.cfg.reconcileMax
			break
		}
		d *= 2
	}
	return c.spread(d)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
