package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem/journal"
)

// Summary counts what Resume found and where each operation ended.
type Summary struct {
	Visited   int // open operations found in the journal (Deferred among them)
	Succeeded int // settled succeeded, and nothing contradicts it
	// Failed: settled failed, and nothing says it may have executed.
	Failed     int
	Processing int // accepted by the server, not finished yet
	Unknown    int // still unconfirmed, due for the reconciler
	Pending    int // never sent (the caller stopped waiting first)
	// Review: flagged for a person, open (key expired, deadline passed)
	// or settled (its Result's State says how, but it may have executed
	// twice, or the server's word contradicts it: ReviewMaybeTwice,
	// ReviewMadeTwice, ReviewConfirmConflict). Never counted as Failed:
	// a failure counted there would read as one to offer again under a
	// new key, a second charge.
	Review int
	// Deferred counts the open operations Resume left to Run without
	// visiting them, because their server looked unreachable: its last
	// visits, many in a row, all ended unknown or never sent, or flagged
	// for a person with no answer from it.
	Deferred int
}

// add counts where a visit left its operation, and reports whether it got
// nowhere: still unknown, or never sent.
func (s *Summary) add(res *Result) (stalled bool) {
	if res == nil {
		return false
	}
	switch {
	case res.Review != "":
		s.Review++
	case res.State == StateSucceeded:
		s.Succeeded++
	case res.State == StateFailed:
		s.Failed++
	case res.State == StateProcessing:
		s.Processing++
	case res.State == StatePending:
		s.Pending++
		return true
	default:
		s.Unknown++
		return true
	}
	return false
}

// Resume drives every open operation in the journal once, as Do would, and
// reports where each ended. Call it at start-up, before new work: an
// operation that may have been sent is queried first, then resent with the
// same key only inside its key window; one the server said it holds
// (processing) is only queried, if it has a result endpoint (see the
// package documentation's outcome table). A server's wait the last process
// read (429 or 503 with a Retry-After) still holds: Resume waits out one
// that ends within the visit's budget (WithMaxElapsed) and leaves a longer
// one to Run, due when it ends. Once many visits in a row to one host
// (as many as mark it unreachable, below) have waited for operations its
// server still processes after the wait (a bank debit may take days),
// Resume asks about that host's others once and leaves them to Run. Its
// cost grows with the number of open operations, not with the journal's
// size. Each settlement is also reported to the WithSettleFunc callback.
//
// Resume does not wait out an outage: once many visits in a row (twice
// WithResumeConcurrency, at least 8) to one host have ended unknown or
// unsent, or flagged for a person though the server said nothing (a
// query past the key window timed out; one to a result endpoint on
// another host counts only beside a visit the host itself left
// unanswered), it starts no more for that host, and goes on with the
// others; once that many in a row to several hosts have, it starts no
// more at all. It counts the operations it left in Summary.Deferred.
// They stay journaled and due, and Run settles them once the server
// answers; call Resume again to settle them at once instead.
//
// Nor does one host that answers, but slowly (an acquirer that holds each
// request for seconds, a result endpoint that stalls), hold up the
// others: Resume visits up to twice WithResumeConcurrency operations at
// once, and at most WithResumeConcurrency of them on one host, so the
// other hosts' operations are visited meanwhile, wherever they lie in the
// journal. The slow host's all wait their turn and are visited, each
// once, its share at a time: Resume returns when the last of them ends.
// When no visit to a host that holds its share ends for about a quarter
// of the attempt timeout (at most 5s), Resume logs "a host answers
// slowly" at Info.
//
// The error is non-nil only if the journal cannot be read or written, or
// ctx ends; the Summary then counts what was done.
//
// A panic of the caller's code in a visit (a Decoder, Classifier, request
// hook, transport, Hooks function) is caught: it is logged at Error with
// its stack, and an operation the visit had not settled stays open,
// unknown if it may have been sent, for the next visit. Run's visits
// catch it so too.
func (c *Client) Resume(ctx context.Context) (Summary, error) {
	ctx, b, err := c.begin(ctx, true)
	if err != nil {
		return Summary{}, err
	}
	defer c.end(b)
	var refs []ref
	err = c.store.ForEachOpen(ctx, func(r *journal.Record) error {
		refs = append(refs, ref{scope: r.Scope, key: r.Key, host: c.hostOf(r)})
		c.ignoring.relearn(r) // before any visit
		c.sights.listed(r, c.cfg.clock.Now(), c.cfg.reconcileDeadline)
		return nil
	})
	if err != nil {
		return Summary{}, errorf("idem: resume: %w", withCause(ctx, err))
	}
	// And the endpoints journaled by an earlier process, whose flagged
	// operations may all have settled: unread, a resend to one of them
	// reads them first (ignoringLearnt).
	if c.keptIgnoring(ctx) == nil {
		c.ignoring.learnt.Store(true)
	}
	sum := Summary{Visited: len(refs)}
	var journalErr error
	visited, halted := 0, false
	// Per host, so that one host down neither holds start-up for its whole
	// backlog nor hides another's progress; and across hosts since the
	// last visit that got anywhere, so that a network down for every host
	// stops Resume as soon as one host down does.
	stalls := newHostStalls(resumeGiveUp(c.cfg.resumeConcurrency))
	fruitless, fruitlessHosts := 0, map[string]bool{}
	// fruitlessOwn: a visit of those fruitless ones got nowhere with its
	// own host, not only with another's result endpoint (strayedFrom).
	fruitlessOwn := false
	// Per host, the visits in a row that waited for an operation the
	// server kept processing. A server whose work takes days (bank
	// debits) answers "processing" to every visit: each waited its
	// budget's attempts for nothing, and a backlog of them held start-up
	// for hours, on every restart. Past as many as mark a host down,
	// Resume asks once and leaves such operations to Run.
	processing := map[string]int{}
	skip := func(r *ref) bool {
		r.brief = processing[r.host] >= stalls.giveUp
		return stalls.isDown(r.host)
	}
	c.visitFair(ctx, resuming, refs, nil, nil, nil, nil, skip, func(r ref, res *Result, news hostNews, err error) bool {
		visited++
		if err != nil && journalErr == nil && isJournalErr(err) {
			journalErr = err
		}
		if res != nil && res.State == StateProcessing && res.Review == "" {
			if processing[r.host]++; processing[r.host] == stalls.giveUp {
				c.log.LogAttrs(ctx, slog.LevelInfo, "idem: resume: a host keeps its operations processing; the reconciler (Run) follows them up",
					slog.String("host", r.host), slog.Int("processing_in_a_row", stalls.giveUp))
			}
		} else if !r.brief {
			delete(processing, r.host)
		}
		// A visit flagged for a person after hearing nothing (an order
		// past its key window whose query to the down host timed out)
		// got nowhere either: it waited out its attempts as a silent
		// visit does, and counted as progress, every such visit of a
		// backlog that interleaves them with silent ones broke the
		// streak, so Resume visited the whole backlog of the down host.
		stalled := sum.add(res)
		strayed := false
		if res != nil && res.Review != "" && news.unheard() {
			stalled, strayed = true, news.reach == reachNone
		}
		// One that made no exchange with its host, its query to a result
		// endpoint on another host unanswered, says nothing of its own
		// host, which may be up (strayedFrom).
		var change hostChange
		if strayed {
			change = stalls.strayedFrom(r.host, c.cfg.clock.Now())
		} else {
			change = stalls.visited(r.host, stalled, c.cfg.clock.Now())
		}
		if change == hostFoundDown {
			c.log.LogAttrs(ctx, slog.LevelWarn, "idem: resume: a host looks unreachable; the reconciler (Run) settles its operations once it answers",
				slog.String("host", r.host), slog.Int("fruitless_in_a_row", stalls.giveUp))
		}
		if !stalled {
			fruitless, fruitlessOwn = 0, false
			clear(fruitlessHosts)
			return true
		}
		fruitless++
		fruitlessHosts[r.host] = true
		fruitlessOwn = fruitlessOwn || !strayed
		halted = fruitless >= stalls.giveUp && len(fruitlessHosts) > 1 && fruitlessOwn
		return !halted
	})
	if visited < sum.Visited && ctx.Err() == nil {
		sum.Deferred = sum.Visited - visited
		if halted {
			c.log.LogAttrs(ctx, slog.LevelWarn, "idem: resume: the servers look unreachable; the reconciler (Run) settles the rest once they answer",
				slog.Int("fruitless_in_a_row", fruitless), slog.Int("hosts", len(fruitlessHosts)), slog.Int("deferred", sum.Deferred))
		}
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "idem: resume done",
		slog.Int("visited", sum.Visited), slog.Int("succeeded", sum.Succeeded), slog.Int("failed", sum.Failed),
		slog.Int("processing", sum.Processing), slog.Int("unknown", sum.Unknown), slog.Int("review", sum.Review),
		slog.Int("deferred", sum.Deferred))
	if journalErr != nil {
		return sum, errorf("idem: resume: %w", journalErr)
	}
	return sum, context.Cause(ctx)
}

// ref names an operation to visit, and the lease Run claimed it with
// (none for Resume, whose visits claim their own).
type ref struct {
	scope, key string
	lease      journal.Lease
	host       string // where it is sent (hostOf): Resume and Run judge stalls per host
	// overdue: Run claimed it past the reconciliation deadline; its visit
	// flags it for review, and sends nothing.
	overdue bool
	// brief: Resume's earlier visits to host, many in a row, left their
	// operations processing after waiting for them: this one is not
	// waited for (driver.brief).
	brief bool
}

// visitor runs the visits of visitFair: skip and done are called one at
// a time, under mu.
type visitor struct {
	c      *Client
	ctx    context.Context
	mode   driveMode
	skip   func(*ref) bool
	done   func(ref, *Result, hostNews, error) bool
	mu     sync.Mutex
	halted bool // done said stop
}

// stopped reports whether no further visit may start: done said stop,
// or ctx ended.
func (v *visitor) stopped() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.halted || v.ctx.Err() != nil
}

// run visits r, unless visits have stopped (a ref handed over as ctx
// ended or done said stop) or skip names it.
func (v *visitor) run(r ref) {
	if v.stopped() {
		return
	}
	if v.skip != nil {
		v.mu.Lock()
		skipped := v.skip(&r)
		v.mu.Unlock()
		if skipped {
			return
		}
	}
	res, reach, err := v.c.visitCaught(v.ctx, r, v.mode)
	v.mu.Lock()
	if !v.done(r, res, reach, err) {
		v.halted = true
	}
	v.mu.Unlock()
}

// visitCaught is visit on Resume's and Run's own goroutines, where a
// panic reaches no caller who could recover it: one of the caller's code
// outside the drive (runCaught catches those in it, reportEnd those of
// the hooks told how it ended) that the drive surrounds (the Call hook,
// WithSettleFunc's callback) killed the process, and a Call hook that
// panics on an operation did so again at every start-up. The operation
// stays as the drive left it.
func (c *Client) visitCaught(ctx context.Context, r ref, mode driveMode) (res *Result, news hostNews, err error) {
	defer func() {
		if p := recover(); p != nil {
			cause := fmt.Errorf("%w: %v", errCallPanicked, p)
			res, err = c.current(r.scope, r.key, cause)
			open := res == nil || !res.State.Terminal() // unread: say it may be
			_ = c.visitPanicked(ctx, mode, p, open, []slog.Attr{slog.String("scope", r.scope), slog.String("key", r.key)})
			news = hostNews{}
		}
	}()
	return c.visit(ctx, r, mode)
}

// visit drives one journaled operation, joining any call in flight for it
// (and then reports no news of the host: it made no exchange of its own).
// Unlike Do it reports settlements to the WithSettleFunc callback, because
// nobody is waiting for them.
func (c *Client) visit(ctx context.Context, r ref, mode driveMode) (*Result, hostNews, error) {
	scope, key := r.scope, r.key
	var settledHere bool
	var news hostNews
	res, err := c.coalesce(ctx, scope, key, nil, mode, func() (*Result, error) {
		// Read even if ctx is done (as Do does): a visit a worker took just
		// as Close drained ctx must not report a broken journal.
		var rec *journal.Record
		var err error
		l := r.lease
		if l.Token != 0 {
			// Claimed by Run: read it again, a caller of this process may
			// have driven it since (and then its claim fences this one).
			rec, err = c.store.Get(context.WithoutCancel(ctx), scope, key)
			if err != nil {
				// Undriven, the claim must not keep every reconciler off
				// the operation until it expires. A failure leaves it to.
				_ = c.store.Release(context.WithoutCancel(ctx), l)
			}
		} else {
			rec, l, err = c.claim(ctx, scope, key, mode)
		}
		switch {
		case errors.Is(err, journal.ErrLeased):
			return c.finish(rec, err)
		case err != nil && l.Token == 0 && ctx.Err() != nil:
			return c.claimCut(ctx, scope, key, err)
		case err != nil:
			return nil, c.lookupErr(scope, key, err)
		}
		res, settled, drove, err := c.driveSettling(ctx, rec, l, mode, false, r.brief)
		settledHere, news = settled, drove
		return res, err
	})
	if settledHere && c.cfg.onSettle != nil {
		c.cfg.onSettle(res.clone())
	}
	return res, news, err
}

// reconcileBatch bounds one pass of Run over due operations.
const reconcileBatch = 256

// pruneEvery spaces Run's pruning of old settled operations.
const pruneEvery = time.Hour

// Prune deletes succeeded and failed operations settled more than
// WithRetainSettled ago by the Client's clock, and returns how many it
// deleted. A clock this process has seen stepped forward (its monotonic
// reading tells) is taken to have run behind before: the cut-off is set
// back by the step, until the retention has passed since it was seen
// (what was settled before it is older than that by then). Run prunes on its
// own hourly, and again on its next pass after a failed prune, with a
// cut-off it also checks against the time it has measured (see Run).
// Open operations are never pruned, whatever their age, nor settled ones
// flagged for review (ReviewConfirmConflict: a confirmation or a late
// answer contradicted them) until Resolve settles them; their retention
// then counts from the resolution.
func (c *Client) Prune(ctx context.Context) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	defer c.exit()
	if c.cfg.retainSettled == 0 {
		return 0, nil
	}
	now := c.cfg.clock.Now()
	return c.pruneBefore(ctx, c.unstepped(now, c.cfg.retainSettled).Add(-c.cfg.retainSettled))
}

// unstepped is now, the clock's reading, set back by how far the wall
// clock reads ahead of any frame this process has seen it in that ended
// less than within ago (wallSteps; within is the age judged, and what a
// frame ended longer ago holds is older than that anyway): an operation
// journaled while the clock ran behind (a board without a real-time
// clock, booted at the time saved at its shutdown days ago, NTP out of
// reach for a while) is stamped that much early, and once the clock is
// put right it looks that much older than it is. Run's measure
// (runClock) does not see a step made before it took its anchor, which
// it takes once the clock is right. Pruned early, such an operation is
// journaled afresh and sent when its request is redelivered with its
// key, a second order once the server has forgotten the key; flagged
// past the reconciliation deadline, an order never sent is not sent
// until a person acts. A step forward that time really took (a suspended
// VM resumed) only makes both wait longer, by within at the most.
func (c *Client) unstepped(now time.Time, within time.Duration) time.Time {
	// now as read, not Round(0): stripped of its monotonic reading, a
	// time.Now reading shows no step (wallView measures the time lived
	// by it), and would set the steps' lived to the wall clock's time,
	// step and all, so that the next readings start no frame.
	steps := c.wallView(now)
	now = now.Round(0)
	if ahead := steps.stepAhead(now, within); ahead > clockSlack {
		return now.Add(-ahead)
	}
	return now
}

// pruneBefore prunes the operations settled before cutoff. It does not
// enter the Client: Run, which calls it too, has entered already, and
// entering again would fail as soon as Close begins, before ctx ends, and
// read as a journal error.
func (c *Client) pruneBefore(ctx context.Context, cutoff time.Time) (int, error) {
	n, err := c.store.Prune(ctx, cutoff)
	if err != nil {
		return n, fmt.Errorf("idem: %w", err) // "idem: journal: prune: …"
	}
	if n > 0 {
		c.log.LogAttrs(ctx, slog.LevelInfo, "idem: pruned settled operations", slog.Int("count", n))
	}
	return n, nil
}

// Run is the background reconciler: until ctx ends it prunes settled
// operations past WithRetainSettled (hourly; until it has run an hour,
// only those past twice that), and settles operations that are due (unknown, processing, or abandoned), on their own schedule
// (WithReconcile), and reports each settlement to the WithSettleFunc
// callback. A visit never sleeps on an operation: what does not settle is
// rescheduled. Operations past the reconciliation deadline are flagged for
// review and then only queried, once a day (on WithReconcile's schedule
// while the result endpoint gets no answer: the server keeps the key
// only so long). An operation scheduled
// further ahead than any schedule reaches (written while the clock ran
// fast, before a step back) is made due at once, on Run's first pass and
// hourly after. Due operations are visited
// WithResumeConcurrency at a time, so one slow server answer does not hold
// up the rest. Nor does one server down: once many visits in a row to a
// host (twice WithResumeConcurrency, at least 8) have had no answer from
// it (or only 502, 503 or 504, or Cloudflare's 52x for the origin; the
// host is the request URL's, and queries to a result endpoint on another
// host do not count), Run probes that
// host with one visit a pass and postpones its other due operations, by
// about as long as it has been unreachable (within WithReconcile's
// interval and maximum); once a probe gets an answer they are due at
// once. A host that answers 429 or 503 with a Retry-After (or a 429 whose
// rate-limit fields say when its spent quota resets) has asked this
// client, not one request, to wait: Run sends it nothing more until that
// wait (at most WithReconcile's maximum) is over, and postpones its due
// operations to then. A 429 that names no wait rests the host so too,
// for a backoff: WithReconcile's interval, doubling (jittered) with each
// such 429 after a rest, up to its maximum, until a request of Run's
// gets an answer other than a 429 or a gateway's 5xx, or a 429 comes
// more than that maximum after the last rest ended. A host that asked for
// rest either way gets one visit at a time until WithResumeConcurrency
// of its answers in a row are let through (a limiter that lets one
// request a second through refuses all but one of a burst), and a rest
// that ends before Run's next pass would start it then, a second at the
// least if that host let one of Run's requests through on the pass.
// An operation past the reconciliation deadline is
// still flagged on time. Nor does one server that answers, but slowly,
// within the attempt timeout (an acquirer's authorisation that takes
// seconds, a result endpoint that stalls): Run visits up to twice
// WithResumeConcurrency operations at once, and at most
// WithResumeConcurrency of them on one host, so that the others always
// have as many workers again; when no visit to a host that holds its
// share ends for about a quarter of the attempt timeout (at most 5s),
// Run takes the host for slow (Health lists it: SlowSince) and gives up
// its claims on that host's waiting operations, pushed back to about
// when the host's share reaches them (within WithReconcile's interval
// and maximum), and claims the other hosts' due operations, again every
// eighth of the attempt timeout while the slow visits last.
//
// A clock stepped forward does not make Run prune early, nor flag
// operations past the reconciliation deadline early: once Run has run an
// hour (long enough for NTP to put right a clock that was wrong at boot),
// it never believes the clock further ahead than its reading then plus
// the time Run has measured since, by its own waits and passes. After such
// a step, both wait longer, by the step, until Run starts again; and,
// for a step this process saw by its monotonic reading (as Prune), until
// the retention (the deadline) has passed since it was seen, whenever
// the step was made. While
// Run runs, an operation's key window is judged by that measure as well
// as by the clock: no resend while the clock reads less time than Run
// measured (stepped back: flagged ReviewClockStepped if by Run's measure
// the key expired), and no "key expired" flag while it reads more (the
// visit is put off). Before
// that hour, Run prunes only what is past twice the retention: a clock
// fast by less than the retention cannot make it prune early, and a
// process that never lives an hour still prunes.
//
// Run outlives journal errors that may pass (a full disk, a failed write
// or fsync, an I/O error): a pass that meets one, while pruning, reading
// the due operations or recording a visit, starts no further visits, and
// Run waits before the next pass (jittered exponential backoff from 1s up
// to a minute), logs the error (Warn, then Error once it persists) and
// reports it through Health. An operation whose visit could not be
// recorded stays due, so the first pass after writes work again settles
// it. Run stops only on a journal it cannot use again: a damaged file
// (journal.ErrCorrupt), one written by a newer idem (journal.ErrVersion),
// one whose file failed a commit after writing it (journal.ErrFileFailed:
// close and reopen it, or restart), or a journal closed
// (journal.ErrClosed) or read-only under the Client.
//
// Run returns context.Cause(ctx) when ctx ends, ErrClosed when the Client
// is closed, or an error matching the journal's sentinel when the journal
// is unusable. Run one per Client.
func (c *Client) Run(ctx context.Context) (err error) {
	ctx, b, err := c.begin(ctx, true)
	if err != nil {
		return err
	}
	defer c.end(b)
	h := &c.life.health
	h.runStarted()
	defer func() { h.runEnded(err) }()

	poll := c.poll()
	bo := newRunBackoff(c.cfg.clock)
	c.life.run.start()
	defer c.life.run.stop()
	var sched runSchedule
	stalls := c.runStalls()
	for {
		start := c.cfg.clock.Now()
		full, phase, perr := c.pass(ctx, &sched, stalls)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		now := c.cfg.clock.Now()
		h.hostsSeen(stalls.report(now))
		c.measure(&sched, min(now.Sub(start), maxPassMeasured), now)
		wait := poll
		if perr != nil {
			if permanentJournalErr(perr) {
				h.stopped(perr, now)
				c.runFailed(ctx, perr)
				c.log.LogAttrs(ctx, slog.LevelError, "idem: reconciler stopped: journal unusable",
					slog.String("phase", phase), slog.String("err", perr.Error()))
				return perr
			}
			wait = bo.NextBackOff()
			n, since := h.failed(perr, now, now.Add(wait))
			c.runFailed(ctx, perr)
			level := slog.LevelWarn
			if n >= runErrorLevelAfter {
				level = slog.LevelError
			}
			c.log.LogAttrs(ctx, level, "idem: reconciler: journal error, retrying",
				slog.String("phase", phase), slog.String("err", perr.Error()),
				slog.Int("consecutive_errors", n), slog.Duration("retry_in", wait),
				slog.Duration("elapsed", now.Sub(since)))
		} else {
			bo.Reset()
			if n, since := h.passed(now); n > 0 {
				c.log.LogAttrs(ctx, slog.LevelInfo, "idem: reconciler: journal recovered",
					slog.Int("consecutive_errors", n), slog.Duration("elapsed", now.Sub(since)))
			}
			if full {
				continue // more are due now
			}
			// The rest, ending before the poll (429, Retry-After: 1), of
			// a host that let a request through is when its postponed
			// operations come due: slept through, a limiter that lets
			// one request a second through saw one of Run's every 5 s,
			// and a backlog went past its key window. Never before the
			// rest's end, nor sooner than minRestWait: a Retry-After or
			// rate-limit reset a millisecond ahead must not spin Run.
			if until, ok := stalls.wakeAt(now); ok && until.Sub(now) < wait {
				wait = min(max(until.Sub(now), minRestWait), poll)
			}
		}
		if err := c.cfg.clock.Sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		c.measure(&sched, wait, c.cfg.clock.Now())
	}
}

// runStalls is what Run knows of its hosts, kept across its passes.
func (c *Client) runStalls() *hostStalls {
	stalls := newHostStalls(resumeGiveUp(c.cfg.resumeConcurrency))
	stalls.maxRest, stalls.firstRest, stalls.share = c.cfg.reconcileMax, c.cfg.reconcileInterval, c.cfg.resumeConcurrency
	return stalls
}

// poll is Run's longest wait between passes.
func (c *Client) poll() time.Duration { return min(c.cfg.reconcileInterval, 5*time.Second) }

// minRestWait is Run's shortest wait for a host's rest to end before its
// next pass (Retry-After counts whole seconds).
const minRestWait = time.Second

// Run's waits after a pass that met a journal error. A minute at most:
// a freed disk should not leave operations unsettled for long, and a
// failing pass costs little (it stops at its first journal error).
const (
	runRetryInitial = time.Second
	runRetryMax     = time.Minute
	// runErrorLevelAfter is the streak of failed passes (about 2.5 minutes
	// of backoff) from which Run logs at Error rather than Warn: a blip is
	// a warning, a journal that stays broken needs someone.
	runErrorLevelAfter = 5
)

func newRunBackoff(clk Clock) backoff.BackOff {
	return jitteredBackoff(runRetryInitial, runRetryMax, backoff.WithClockProvider(clk)) // only ctx and Close stop Run
}

// pass prunes and looks for operations scheduled too far ahead (hourly
// each), then visits the operations due now, once: for a host that looks
// unreachable (stalls), one of them, and it postpones the rest. It returns
// whether the last batch it claimed was whole, and the first journal
// error it met with where ("prune", "reschedule", "due", "visit",
// "postpone", "bring back", "push back"). Visits to a host that answers
// slowly hold at most its share of the workers (visitFair). A failed
// prune or reschedule does not skip the visits: settling operations
// matters more, and the next pass tries again.
func (c *Client) pass(ctx context.Context, sched *runSchedule, stalls *hostStalls) (full bool, phase string, err error) {
	if c.cfg.retainSettled > 0 && (!sched.pruned || sched.sincePrune >= pruneEvery) {
		now := c.cfg.clock.Now()
		cutoff := minTime(c.life.run.pruneCutoff(now, c.cfg.retainSettled), c.unstepped(now, c.cfg.retainSettled).Add(-c.cfg.retainSettled))
		if _, perr := c.pruneBefore(ctx, cutoff); perr != nil {
			if ctx.Err() != nil {
				return false, "", nil
			}
			phase, err = "prune", perr
		} else {
			sched.pruned, sched.sincePrune = true, 0
		}
	}
	if !sched.swept || sched.sinceSweep >= rescheduleEvery {
		if serr := c.reschedule(ctx); serr != nil {
			if ctx.Err() != nil {
				return false, "", nil
			}
			if err == nil {
				phase, err = "reschedule", serr
			}
		} else {
			sched.swept, sched.sinceSweep = true, 0
		}
	}
	if !sched.learnt {
		if lerr := c.learnIgnoring(ctx); lerr != nil {
			if ctx.Err() != nil {
				return false, "", nil
			}
			// No visit without it: one could resend a payment to an
			// endpoint that would charge it again.
			if err == nil {
				phase, err = "learn", lerr
			}
			return false, phase, err
		}
		sched.learnt = true
	}
	var refs []ref // every ref claimed this pass
	var derr error
	claimed := 0
	var aerr error // the push-back's first journal error
	claim := func() ([]ref, bool) {
		// After a push-back that failed, the same backlog, still due,
		// would be claimed and set aside again at once: on the file
		// journal, whose claims are kept in memory, as fast as a full
		// disk refuses its writes.
		if derr != nil || aerr != nil {
			return nil, false
		}
		now := c.cfg.clock.Now()
		c.handover.claiming.Lock()
		due, err := c.store.ClaimDue(ctx, c.cfg.owner, now, now.Add(c.leaseSpan(c.cfg.attemptTimeout)), reconcileBatch)
		claimed = len(due)
		due = c.handOver(due)
		c.handover.claiming.Unlock()
		if err != nil {
			derr = err
			return nil, false
		}
		got := make([]ref, len(due))
		for i, d := range due {
			c.ignoring.relearn(d.Record) // before any visit
			got[i] = ref{scope: d.Record.Scope, key: d.Record.Key, lease: d.Lease, host: c.hostOf(d.Record),
				overdue: c.pastDeadline(d.Record, now)}
		}
		refs = append(refs, got...)
		return got, claimed == reconcileBatch
	}
	first, _ := claim()
	if derr != nil {
		if ctx.Err() != nil {
			return false, "", nil
		}
		if err == nil {
			phase, err = "due", fmt.Errorf("idem: reconcile: %w", derr)
		}
		return false, phase, err
	}
	// One visit a pass (and one at a time on each tick of a pass that
	// lasts, below) probes a host that looks unreachable, and one that
	// made no exchange of its own is none; the rest of its operations
	// are postponed, so that its backlog does not hold up the
	// other hosts' operations. A host that asked for rest (429 or 503 with
	// Retry-After, or a 429 naming no wait: throttled) gets no visit until
	// the rest is over: its operations
	// are postponed to then. One past the reconciliation deadline is
	// visited all the same: its visit flags it for review, with no request.
	probed := map[string]bool{}
	probing := map[string]ref{}   // the probe under way, by host
	waiting := map[string][]ref{} // by host: passed over while its probe is under way
	var postponed []ref
	skip := func(p *ref) bool {
		r := *p
		if r.overdue {
			return false
		}
		if _, ok := stalls.restUntil(r.host, c.cfg.clock.Now()); ok {
			postponed = append(postponed, r)
			return true
		}
		if !stalls.isDown(r.host) {
			return false
		}
		if !probed[r.host] {
			probed[r.host] = true
			probing[r.host] = r
			return false
		}
		if _, on := probing[r.host]; on {
			// What the probe tells decides (done).
			waiting[r.host] = append(waiting[r.host], r)
			return true
		}
		postponed = append(postponed, r)
		return true
	}
	var verr error
	failed := 0
	visited := make(map[ref]bool, len(refs))
	asideCount := map[string]int{}        // by host: how many were set aside this pass (pushBack's k)
	pushedUntil := map[string]time.Time{} // by host: when the last operation set aside falls due
	// Set aside or postponed on a tick, their claims given up: apart from
	// visited, which done writes from the workers under the visitor's
	// lock, while aside runs on visitFair's own goroutine without it.
	givenUp := map[ref]bool{}
	aside := func(set []ref) {
		if e := c.pushBack(ctx, set, asideCount, pushedUntil); e != nil && aerr == nil {
			aerr = e
		}
		for _, r := range set {
			givenUp[r] = true
		}
	}
	var perr, berr error // postpone's and bringBack's first
	// The hosts this pass visited, each with whether it took the host for
	// slow: one it visited and did not, or none of whose operations waits
	// any more, is slow no more (Health).
	judged := map[string]bool{}
	// A pass lasts as long as a slow host's visits do, claiming on
	// meanwhile: what it does once a pass for a host that looks
	// unreachable or resting is done on each tick as well. Else that
	// host, probed once, is not probed again however long the pass
	// lasts, though it may be back, and the operations passed over for
	// it stay claimed, every other replica kept off them, until the
	// pass ends. Those are postponed and given up now; a host whose
	// probe ended gets another, one at a time; and what was postponed
	// for a host that answers again is due at once.
	tick := func(slowed []string) {
		if len(slowed) > 0 {
			now := c.cfg.clock.Now()
			for _, host := range slowed {
				judged[host] = true
				stalls.slowed(host, now)
			}
			// Now, not when the pass ends: it lasts as long as the slow
			// visits do, and an operator wants to know meanwhile.
			c.life.health.hostsSeen(stalls.report(now))
		}
		for host := range probed {
			if _, on := probing[host]; !on {
				delete(probed, host)
			}
		}
		if len(postponed) > 0 {
			if e := c.postpone(ctx, postponed, stalls); e != nil && perr == nil {
				perr = e
			}
			rctx, cancel := c.releasesContext(ctx)
			for _, r := range postponed {
				_ = c.store.Release(rctx, r.lease) // a failure only leaves the lease to expire
				givenUp[r] = true
			}
			cancel()
			postponed = nil
		}
		if e := c.bringBack(ctx, stalls); e != nil && berr == nil {
			berr = e
		}
	}
	c.visitFair(ctx, reconciling, first, claim, aside, tick, stalls.pacedAlone, skip, func(r ref, _ *Result, news hostNews, err error) bool {
		visited[r] = true
		if probing[r.host] == r {
			delete(probing, r.host)
			if news.reach == reachNone && !news.stuckElsewhere {
				// A probe that made no exchange with the host (flagged, its
				// key window over by our clock or by the Date a clock
				// probe's HEAD taught; a call in flight joined; settled
				// or handed off on the word of a result endpoint on
				// another host) told nothing of it (a HEAD a CDN answers
				// may not speak for the origin): the next of its
				// operations probes it, and those passed over meanwhile
				// stay due for the next pass. Postponed, they were
				// pushed back by as long as the outage had lasted (up to
				// an hour) though the host might be back: an order whose
				// key the server still kept came due past its key
				// window, for a person. One whose query to that endpoint
				// got no answer, or a 429, still counts: the next would
				// ask the same endpoint to no more avail, and the next,
				// every due operation of the host visited on each pass.
				delete(probed, r.host)
			} else {
				postponed = append(postponed, waiting[r.host]...)
			}
			delete(waiting, r.host)
		}
		switch {
		case !news.rest.IsZero():
			stalls.rested(r.host, news.rest)
		case news.throttled:
			stalls.throttled(r.host, c.cfg.clock.Now())
		case news.letThrough:
			stalls.letThrough(r.host)
		}
		// The visit wrote its own NextDue: bringBack has nothing of it to
		// move, and its entry would outlive it (a host paced for days).
		delete(stalls.postponed[r.host], opID{r.scope, r.key})
		// Only silence: an operation a host answers about without
		// settling it (a query's 404) says the host is there, and a
		// visit that sent nothing says nothing.
		var change hostChange
		if news.reach != reachNone {
			change = stalls.visited(r.host, news.reach == reachSilent, c.cfg.clock.Now())
			if _, seen := judged[r.host]; !seen {
				judged[r.host] = false // slow only once tick says so
			}
		}
		switch change {
		case hostFoundDown:
			c.log.LogAttrs(ctx, slog.LevelWarn, "idem: reconciler: a host looks unreachable; its operations are postponed, and probed one a pass",
				slog.String("host", r.host), slog.Int("fruitless_in_a_row", stalls.giveUp))
		case hostBack:
			c.log.LogAttrs(ctx, slog.LevelInfo, "idem: reconciler: a host answers again", slog.String("host", r.host))
		}
		if err != nil && isJournalErr(err) {
			verr = journalCause(err)
			failed++
			// One record the journal cannot write must not starve the
			// others (it is first in Due's order on every pass); several
			// failures say the journal itself fails, and every further
			// visit would send a query whose answer is lost.
			return failed < maxVisitFailures
		}
		return true
	})
	stalls.passJudged(judged, pushedUntil, c.cfg.clock.Now())
	if e := c.postpone(ctx, postponed, stalls); e != nil && perr == nil {
		perr = e
	}
	if perr != nil && err == nil && verr == nil {
		phase, err = "postpone", perr
	}
	now := c.cfg.clock.Now()
	stalls.unpace(now)
	stalls.forgetBackoffs(now)
	if e := c.bringBack(ctx, stalls); e != nil && berr == nil {
		berr = e
	}
	if berr != nil && err == nil && verr == nil {
		phase, err = "bring back", berr
	}
	stalls.forgetDue(c.cfg.clock.Now())
	for r := range givenUp {
		visited[r] = true
	}
	c.releaseUnvisited(ctx, refs, visited)
	if err == nil && verr != nil {
		phase, err = "visit", verr
	}
	if err == nil && derr != nil && ctx.Err() == nil {
		phase, err = "due", fmt.Errorf("idem: reconcile: %w", derr)
	}
	if err == nil && aerr != nil {
		phase, err = "push back", aerr
	}
	return claimed == reconcileBatch, phase, err
}

// learnIgnoring learns again, from the open operations flagged for it
// (ReviewKeyIgnored), the endpoints that ignore the key: what the process
// that flagged them knew (keyIgnoring) died with it, and Run's first
// claims may come before any flagged operation is due.
func (c *Client) learnIgnoring(ctx context.Context) error {
	if err := c.ignoringLearnt(ctx); err != nil {
		return fmt.Errorf("idem: reconcile: %w", err)
	}
	return nil
}

// pastDeadline reports whether rec, not yet flagged, has passed the
// reconciliation deadline: Run's next visit flags it for review. Run's
// measured time bounds now (runClock), and so do the steps forward this
// process has seen (unstepped): a clock stepped forward must not hand
// every open operation to a person, for good. One flagged only by a
// Client on other settings is not yet flagged here (movedHere), which
// drives it.
func (c *Client) pastDeadline(rec *journal.Record, now time.Time) bool {
	return (rec.Review == "" || c.movedHere(rec)) && minTime(c.life.run.trusted(now), c.unstepped(now, c.cfg.reconcileDeadline)).Sub(rec.Created) >= c.cfg.reconcileDeadline
}

// rescheduleEvery spaces Run's searches for operations scheduled further
// ahead than any schedule reaches (reschedule).
const rescheduleEvery = time.Hour

// reschedule makes due now every open operation whose NextDue lies
// further ahead than any schedule of this Client sets it
// (furthestDue): it was written while the clock ran fast, and the clock
// has been stepped back since. Left as it is, Run would not visit the
// operation for as long as the clock was wrong: an order never sent, or
// never confirmed, for days. It reads every open operation, so Run calls
// it on its first pass and then hourly; Resume visits every open
// operation whatever its NextDue and needs none of it.
func (c *Client) reschedule(ctx context.Context) error {
	now := c.cfg.clock.Now()
	var late []ref
	err := c.store.ForEachOpen(ctx, func(r *journal.Record) error {
		// Before it moves: moved ahead of where a first resend's walk
		// (ignoringLearnt) stands, a flagged operation is never read
		// there, and its endpoint would be taken for one that
		// de-duplicates.
		c.ignoring.relearn(r)
		if c.scheduledTooFar(r, now) {
			late = append(late, ref{scope: r.Scope, key: r.Key})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("idem: reconcile: %w", err)
	}
	wctx := context.WithoutCancel(ctx)
	moved := 0
	for _, r := range late {
		// Unfenced: a drive under way writes its own NextDue when it
		// ends, and one that already has is seen here.
		rec, err := c.moveDue(wctx, r.scope, r.key, func(rec *journal.Record) (time.Time, bool) {
			return now, c.scheduledTooFar(rec, now)
		})
		if err != nil {
			return fmt.Errorf("idem: reconcile: %w", err)
		}
		if rec != nil {
			moved++
		}
	}
	if moved > 0 {
		c.log.LogAttrs(ctx, slog.LevelWarn, "idem: operations scheduled past any schedule's reach (the clock was stepped back) made due now",
			slog.Int("count", moved))
	}
	return nil
}

// scheduledTooFar reports whether rec's NextDue lies further from now
// than any schedule of this Client puts it: a hand-off's (the reconcile
// interval, a server's wait, a wait the budget could not take) or a
// flagged operation's daily recheck. A custom backoff's longer wait is
// taken for a stepped clock too: the operation is then visited early,
// which costs one exchange. One flagged only by a Client on other
// settings (movedHere) is driven here as unflagged: that Client's daily
// recheck would leave an outbox's intent unsent for a day.
func (c *Client) scheduledTooFar(rec *journal.Record, now time.Time) bool {
	furthest := max(c.cfg.reconcileMax, c.cfg.retryAfterCap)
	if rec.Review != "" && !c.movedHere(rec) {
		furthest = max(furthest, reviewRecheck)
	}
	return rec.Open() && beyondSlack(rec.NextDue, now, furthest)
}

// releaseUnvisited gives up the leases of the operations a pass claimed
// but did not visit (it stopped early): another replica may take them
// now rather than when the leases expire.
func (c *Client) releaseUnvisited(ctx context.Context, refs []ref, visited map[ref]bool) {
	wctx, cancel := c.releasesContext(ctx)
	defer cancel()
	for _, r := range refs {
		if !visited[r] {
			// A failure only leaves the lease to expire.
			_ = c.store.Release(wctx, r.lease)
		}
	}
}

// maxVisitFailures is how many visits of one pass may fail to write the
// journal before the pass stops starting visits.
const maxVisitFailures = 3

// journalCause digs the journal's error out of what a visit returned: the
// *Error a visit returns names the operation, not the journal.
func journalCause(err error) error {
	if je := (*journalError)(nil); errors.As(err, &je) {
		return je
	}
	return err
}

// isJournalErr tells a broken journal (stop the reconciler) from an
// operation that simply did not settle yet.
func isJournalErr(err error) bool {
	var je *journalError
	if errors.As(err, &je) {
		return true
	}
	var e *Error
	return !errors.As(err, &e) && !errors.Is(err, ErrNotFound)
}
