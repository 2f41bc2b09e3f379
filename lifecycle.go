package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkit/idem/journal"
)

// lifecycle counts the calls in flight so that closing can wait for them:
// a journal closed under a call would leave its last state change unwritten,
// and the caller with an error that says nothing about the operation.
//
// Closing has two stages. Draining refuses new calls and stops the
// background work (Run, Resume), which nobody waits for. Stopping also ends
// the waits and HTTP exchanges of foreground calls (Do, Submit): each
// records where it stands (unknown, or pending if nothing can have been
// sent) before it returns, so the next Resume picks it up.
type lifecycle struct {
	mu      sync.Mutex
	closing bool
	active  int
	idle    chan struct{} // closed when closing and no call is active
	// bound are the contexts of the calls begun with begin, ended with
	// ErrClosed when closing drains (background work) or stops (every
	// call). A list under mu rather than context.AfterFunc on a shared
	// context: every call registers and unregisters, and AfterFunc costs
	// three allocations and a lock of that context's own each time.
	bound *boundCall

	closeOnce sync.Once
	closeErr  error

	// health is Run's state, for Health (health.go). It outlives Close,
	// so that a probe still learns why Run stopped.
	health healthState
	// run is the time Run has measured (run_clock.go).
	run runClock
}

func (l *lifecycle) init() {
	l.idle = make(chan struct{})
}

// errUnmade is the error of every call on a Client New or Open did not
// make: a nil one (their error ignored) or a zero idem.Client{}, which has
// no journal to write to.
var errUnmade = errors.New("idem: the Client was not made by idem.Open or idem.New (a nil *Client, or a zero idem.Client{}); make it with one of them and check its error")

// usable refuses a call on a Client New or Open did not make, or with a
// nil context, before anything is journaled or sent: either would panic
// further in, in a call that may already have journaled the operation.
func (c *Client) usable(ctx context.Context) error {
	if c == nil || c.store == nil {
		return errUnmade
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context.Context; pass context.Background() or the caller's context", ErrInvalidRequest)
	}
	return nil
}

// enter registers a call, or refuses it once closing has begun, or when
// usable refuses it. Every successful enter must be paired with exit.
func (c *Client) enter(ctx context.Context) error {
	if err := c.usable(ctx); err != nil {
		return err
	}
	l := &c.life
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enterLocked()
}

func (l *lifecycle) enterLocked() error {
	if l.closing {
		return ErrClosed
	}
	l.active++
	return nil
}

func (c *Client) exit() {
	l := &c.life
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exitLocked()
}

func (l *lifecycle) exitLocked() {
	l.active--
	if l.closing && l.active == 0 {
		close(l.idle)
	}
}

// boundCall is one call's context, listed so that closing can end it.
type boundCall struct {
	cancel     context.CancelCauseFunc
	background bool
	prev, next *boundCall
}

// bornReading is the clock's reading when the Client's first call began.
type bornReading struct {
	wall time.Time     // its wall reading
	read time.Time     // as the clock gave it: time.Now's carries a monotonic reading
	mono time.Duration // the clock's Monotonic, if it is a monotonicClock
}

// bornAt is born's wall reading; zero before the Client's first call.
func (c *Client) bornAt() time.Time {
	if b := c.born.Load(); b != nil {
		return b.wall
	}
	return time.Time{}
}

// wallView records and returns what the clock, reading now, shows of
// its wall clock's steps since born (wallSteps), with the time this
// process has lived by a clock no step moves: a Clock's readings'
// monotonic reading, as time.Now's; its Monotonic, if it is a
// monotonicClock. A Clock whose readings carry neither (idemtest.Clock)
// shows none; nor does one before the Client's first call.
func (c *Client) wallView(now time.Time) wallView {
	b := c.born.Load()
	if b == nil {
		return wallView{}
	}
	lived := now.Sub(b.read)
	if m, ok := c.cfg.clock.(monotonicClock); ok {
		lived = m.Monotonic() - b.mono
	}
	return c.steps.observe(now, b.wall, lived)
}

// lagging is resultLagging for rec at now, by one measure of the time
// since each send: the wall clock's steps since born once it shows one
// (wallView, which sees every step by the monotonic reading), else Run's
// trusted clock (a Clock whose readings carry no monotonic reading shows
// none). Not both: a step forward after Run took its anchor is one the
// trusted clock already holds back, and taken back from the send as well
// it held an order never placed for the lag plus the step, for a step of
// ten minutes past DefaultKeyRetention's window (flagged, not resent).
func (c *Client) lagging(rec *journal.Record, now time.Time) bool {
	steps := c.wallView(now)
	if !steps.stepped() {
		now = c.life.run.trusted(now)
	}
	if resultLagging(rec, now, c.bornAt(), steps, c.cfg.resultLag, c.cfg.attemptTimeout) {
		return true
	}
	if c.cfg.resultLag <= 0 {
		return false
	}
	// Nor before the lag has passed since this process first read a send
	// another replica made (sendSights): that replica's clock, by which
	// the send is stamped, may run behind ours.
	// By the wall clock alone, as a send's Start is: the steps since are
	// taken from it, and a monotonic reading, which sees none, had them
	// taken twice (a step forward of S held a "not found" for the lag
	// plus S: a board booted in 1970, never).
	seen := c.sights.since(rec).Round(0)
	return !seen.IsZero() && now.Sub(seen.Add(steps.stepSince(seen))) < c.cfg.resultLag
}

// sentEarlier reports whether an earlier process first sent rec: how
// wrong that process's clock read then is not known to ours.
func (c *Client) sentEarlier(rec *journal.Record) bool {
	return rec.FirstSent.Before(c.bornAt())
}

// readBorn reads the clock for born.
func (c *Client) readBorn() *bornReading {
	now := c.cfg.clock.Now()
	b := &bornReading{wall: now.Round(0), read: now}
	if m, ok := c.cfg.clock.(monotonicClock); ok {
		b.mono = m.Monotonic()
	}
	return b
}

// begin is enter for a call that runs under a context of its own: the
// context it returns ends with the caller's ctx, or when the Client
// stops the call (a foreground call) or begins draining (background
// work), with ErrClosed as its cause. Every successful begin must be
// paired with end.
func (c *Client) begin(ctx context.Context, background bool) (context.Context, *boundCall, error) {
	if err := c.usable(ctx); err != nil {
		return nil, nil, err
	}
	if c.born.Load() == nil {
		c.born.CompareAndSwap(nil, c.readBorn())
	}
	l := &c.life
	// Derived outside the lock: a caller's own context type may run code.
	ctx, cancel := context.WithCancelCause(ctx)
	b := &boundCall{cancel: cancel, background: background}
	l.mu.Lock()
	if err := l.enterLocked(); err != nil {
		l.mu.Unlock()
		cancel(nil)
		return nil, nil, err
	}
	b.next = l.bound
	if l.bound != nil {
		l.bound.prev = b
	}
	l.bound = b
	l.mu.Unlock()
	return ctx, b, nil
}

// end unregisters a call begun with begin and releases its context.
func (c *Client) end(b *boundCall) {
	b.cancel(nil)
	l := &c.life
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.bound = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	}
	b.prev, b.next = nil, nil
	l.exitLocked()
}

// endBound ends, with ErrClosed, the contexts of the calls in flight:
// the background ones, or all of them. No call begins after it: closing
// is set first, and begin checks it under the same lock as it lists.
func (l *lifecycle) endBound(all bool) {
	l.mu.Lock()
	var cancels []context.CancelCauseFunc
	for b := l.bound; b != nil; b = b.next {
		if all || b.background {
			cancels = append(cancels, b.cancel)
		}
	}
	l.mu.Unlock()
	for _, cancel := range cancels {
		cancel(ErrClosed)
	}
}

// Shutdown closes the Client gracefully. New calls get ErrClosed at once,
// and Run and Resume stop at once, their visits in flight too (each leaves
// its operation unknown or pending for the next Resume, and a Do or Submit
// joined to one drives the operation itself). Calls in flight (Do,
// Submit) carry on until they settle or hand their operation to the
// reconciler, as they would have; when ctx ends first they are stopped as
// by Close. Then the journal is closed if the Client opened it (Open),
// as Close does (after up to 10 s for endpoints being journaled, whatever
// ctx says).
//
// An operation whose call was stopped is left unknown (or pending, if
// nothing can have been sent), never failed: the next Resume settles it.
// Shutdown returns ctx's error if it had to stop calls, or the journal's
// error from closing. A nil ctx closes the Client as Close does, and the
// error matches ErrInvalidRequest.
//
// Do not call Shutdown or Close from a hook, decoder or classifier: they
// wait for the call that runs it.
func (c *Client) Shutdown(ctx context.Context) error {
	if ctx == nil {
		// Left open, the journal's lock would outlive a Shutdown meant to
		// release it: close as Close does, and say why.
		return errors.Join(fmt.Errorf("%w: Shutdown: nil context.Context (pass context.Background() to wait for calls in flight); closed at once, as Close does", ErrInvalidRequest), c.Close())
	}
	stopped, err := c.shutdown(ctx)
	if stopped {
		return errors.Join(ctx.Err(), err)
	}
	return err
}

// Close stops the Client at once: new calls get ErrClosed, and calls in
// flight stop waiting and sending, record where their operation stands
// (unknown, or pending if nothing can have been sent; never failed) and
// return errors matching ErrUnknownOutcome and ErrClosed. Close returns
// when they have, after closing the journal if the Client opened it
// (Open); before that it waits, up to 10 s, for the journaling of
// endpoints learnt to ignore the key (KeyIgnoringStore), so that the next
// process knows them, and up to 10 s more to journal again those whose
// journaling failed. To let calls finish first, use Shutdown.
func (c *Client) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.shutdown(ctx)
	return err
}

// closing reports whether Shutdown or Close has begun: the Client takes
// no new calls, and its Store may have another Client (New).
func (c *Client) closing() bool {
	c.life.mu.Lock()
	defer c.life.mu.Unlock()
	return c.life.closing
}

// shutdown reports whether it had to stop calls, and the journal's error
// from closing.
func (c *Client) shutdown(ctx context.Context) (stopped bool, err error) {
	if err := c.usable(ctx); err != nil {
		return false, err
	}
	l := &c.life
	l.mu.Lock()
	if !l.closing {
		l.closing = true
		if l.active == 0 {
			close(l.idle)
		}
	}
	l.mu.Unlock()
	l.endBound(false)

	// Idle first: with no call in flight there is nothing to stop, even if
	// ctx is already done (a select would pick either ready case).
	select {
	case <-l.idle:
	default:
		select {
		case <-l.idle:
		case <-ctx.Done():
			stopped = true
			l.endBound(true)
			<-l.idle
		}
	}
	l.closeOnce.Do(func() {
		l.endBound(true)
		// Before the journal closes, so that the next process on it
		// finds them; bounded. A save the bound cuts short is logged
		// by its goroutine if the Store heeds its context, here if not.
		if err := c.waitSaves(context.Background()); err != nil {
			c.log.LogAttrs(context.Background(), slog.LevelWarn,
				"idem: closing before an endpoint learnt to ignore the idempotency key was journaled; its flagged operations still tell the next process",
				slog.Any("err", err))
		} else {
			// One whose save failed while this process ran, made once
			// more before the journal closes: this process is the only
			// one that knows it.
			sctx, cancel := context.WithTimeout(context.Background(), saveIgnoringTimeout)
			c.saveUnsaved(sctx, nil)
			cancel()
		}
		if c.ownsStore {
			l.closeErr = c.store.Close()
		}
		storeUsers.release(c)
	})
	return stopped, l.closeErr
}
