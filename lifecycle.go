package idem

import (
	"context"
	"errors"
	"sync"
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
	mu       sync.Mutex
	closing  bool
	active   int
	idle     chan struct{} // closed when closing and no call is active
	drain    context.Context
	drainNow context.CancelCauseFunc
	stop     context.Context
	stopNow  context.CancelCauseFunc

	closeOnce sync.Once
	closeErr  error

	// health is Run's state, for Health (health.go). It outlives Close,
	// so that a probe still learns why Run stopped.
	health healthState
}

func (l *lifecycle) init() {
	l.idle = make(chan struct{})
	l.drain, l.drainNow = context.WithCancelCause(context.Background())
	l.stop, l.stopNow = context.WithCancelCause(context.Background())
}

// enter registers a call, or refuses it once closing has begun. Every
// successful enter must be paired with exit.
func (c *Client) enter() error {
	l := &c.life
	l.mu.Lock()
	defer l.mu.Unlock()
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
	l.active--
	if l.closing && l.active == 0 {
		close(l.idle)
	}
}

// bind derives a call's context: it ends with the caller's ctx, or when
// the Client stops the call (a foreground call), or begins draining
// (background work), with ErrClosed as its cause.
func (c *Client) bind(ctx context.Context, background bool) (context.Context, context.CancelFunc) {
	on := c.life.stop
	if background {
		on = c.life.drain
	}
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(on, func() { cancel(ErrClosed) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

// Shutdown closes the Client gracefully. New calls get ErrClosed at once,
// and Run and Resume stop at once, their visits in flight too (each leaves
// its operation unknown or pending for the next Resume, and a Do or Submit
// joined to one drives the operation itself). Calls in flight (Do,
// Submit) carry on until they settle or hand their operation to the
// reconciler, as they would have; when ctx ends first they are stopped as
// by Close. Then the journal is closed if the Client opened it (Open).
//
// An operation whose call was stopped is left unknown (or pending, if
// nothing can have been sent), never failed: the next Resume settles it.
// Shutdown returns ctx's error if it had to stop calls, or the journal's
// error from closing.
//
// Do not call Shutdown or Close from a hook, decoder or classifier: they
// wait for the call that runs it.
func (c *Client) Shutdown(ctx context.Context) error {
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
// (Open). To let calls finish first, use Shutdown.
func (c *Client) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.shutdown(ctx)
	return err
}

// shutdown reports whether it had to stop calls, and the journal's error
// from closing.
func (c *Client) shutdown(ctx context.Context) (stopped bool, err error) {
	l := &c.life
	l.mu.Lock()
	if !l.closing {
		l.closing = true
		if l.active == 0 {
			close(l.idle)
		}
	}
	l.mu.Unlock()
	l.drainNow(ErrClosed)

	// Idle first: with no call in flight there is nothing to stop, even if
	// ctx is already done (a select would pick either ready case).
	select {
	case <-l.idle:
	default:
		select {
		case <-l.idle:
		case <-ctx.Done():
			stopped = true
			l.stopNow(ErrClosed)
			<-l.idle
		}
	}
	l.closeOnce.Do(func() {
		l.stopNow(ErrClosed)
		if c.ownsStore {
			l.closeErr = c.store.Close()
		}
	})
	return stopped, l.closeErr
}
