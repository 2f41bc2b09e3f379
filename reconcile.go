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

// Summary counts what Resume found and where each operation ended.
type Summary struct {
	Visited    int // open operations found in the journal
	Succeeded  int
	Failed     int
	Processing int // accepted by the server, not finished yet
	Unknown    int // still unconfirmed, due for the reconciler
	Pending    int // never sent (the caller stopped waiting first)
	Review     int // flagged for a person (key expired, deadline passed)
}

func (s *Summary) add(res *Result) {
	if res == nil {
		return
	}
	switch {
	case res.Review != "" && !res.State.Terminal():
		s.Review++
	case res.State == StateSucceeded:
		s.Succeeded++
	case res.State == StateFailed:
		s.Failed++
	case res.State == StateProcessing:
		s.Processing++
	case res.State == StatePending:
		s.Pending++
	default:
		s.Unknown++
	}
}

// Resume drives every open operation in the journal once, as Do would, and
// reports where each ended. Call it at start-up, before new work: an
// operation that may have been sent is queried first, then resent with the
// same key only inside its key window. Its cost grows with the number of
// open operations, not with the journal's size. Each settlement is also
// reported to the WithSettleFunc callback.
//
// The error is non-nil only if the journal cannot be read or written, or
// ctx ends; the Summary then counts what was done.
func (c *Client) Resume(ctx context.Context) (Summary, error) {
	if err := c.enter(); err != nil {
		return Summary{}, err
	}
	defer c.exit()
	ctx, release := c.bind(ctx, true)
	defer release()
	var refs []ref
	err := c.store.ForEachOpen(ctx, func(r *journal.Record) error {
		refs = append(refs, ref{r.Scope, r.Key})
		return nil
	})
	if err != nil {
		return Summary{}, fmt.Errorf("idem: resume: %w", withCause(ctx, err))
	}
	sum := Summary{Visited: len(refs)}
	var journalErr error
	c.visitAll(ctx, refs, resuming, func(res *Result, err error) {
		sum.add(res)
		if err != nil && journalErr == nil && isJournalErr(err) {
			journalErr = err
		}
	})
	c.log.LogAttrs(ctx, slog.LevelInfo, "idem: resume done",
		slog.Int("visited", sum.Visited), slog.Int("succeeded", sum.Succeeded), slog.Int("failed", sum.Failed),
		slog.Int("processing", sum.Processing), slog.Int("unknown", sum.Unknown), slog.Int("review", sum.Review))
	if journalErr != nil {
		return sum, fmt.Errorf("idem: resume: %w", journalErr)
	}
	return sum, context.Cause(ctx)
}

// ref names an operation to visit.
type ref struct{ scope, key string }

// visitAll drives refs, at most WithResumeConcurrency at a time, and hands
// each outcome to done, one call at a time. It stops starting new visits
// when ctx ends.
func (c *Client) visitAll(ctx context.Context, refs []ref, mode driveMode, done func(*Result, error)) {
	var mu sync.Mutex
	jobs := make(chan ref)
	var wg sync.WaitGroup
	for range min(c.cfg.resumeConcurrency, len(refs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				if ctx.Err() != nil {
					continue // handed over as ctx ended: start no visit
				}
				res, err := c.visit(ctx, r.scope, r.key, mode)
				mu.Lock()
				done(res, err)
				mu.Unlock()
			}
		}()
	}
	for _, r := range refs {
		if ctx.Err() != nil {
			break
		}
		jobs <- r
	}
	close(jobs)
	wg.Wait()
}

// visit drives one journaled operation, joining any call in flight for it.
// Unlike Do it reports settlements to the WithSettleFunc callback, because
// nobody is waiting for them.
func (c *Client) visit(ctx context.Context, scope, key string, mode driveMode) (*Result, error) {
	var settledHere bool
	res, err := c.coalesce(ctx, scope, key, nil, mode, func() (*Result, error) {
		// Read even if ctx is done (as Do does): a visit a worker took just
		// as Close drained ctx must not report a broken journal.
		rec, err := c.store.Get(context.WithoutCancel(ctx), scope, key)
		if err != nil {
			return nil, c.lookupErr(scope, key, err)
		}
		wasOpen := rec.Open()
		res, err := c.drive(ctx, rec, mode, false)
		settledHere = wasOpen && res != nil && res.State.Terminal()
		return res, err
	})
	if settledHere && c.cfg.onSettle != nil {
		c.cfg.onSettle(res.clone())
	}
	return res, err
}

// reconcileBatch bounds one pass of Run over due operations.
const reconcileBatch = 256

// pruneEvery spaces Run's pruning of old settled operations.
const pruneEvery = time.Hour

// Prune deletes succeeded and failed operations settled more than
// WithRetainSettled ago and returns how many it deleted; Run calls it
// hourly. Open operations are never pruned, whatever their age.
func (c *Client) Prune(ctx context.Context) (int, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.exit()
	if c.cfg.retainSettled == 0 {
		return 0, nil
	}
	n, err := c.store.Prune(ctx, c.cfg.clock.Now().Add(-c.cfg.retainSettled))
	if err != nil {
		return n, fmt.Errorf("idem: prune: %w", err)
	}
	if n > 0 {
		c.log.LogAttrs(ctx, slog.LevelInfo, "idem: pruned settled operations", slog.Int("count", n))
	}
	return n, nil
}

// Run is the background reconciler: until ctx ends it prunes settled
// operations past WithRetainSettled, and settles operations
// that are due (unknown, processing, or abandoned), on their own schedule
// (WithReconcile), and reports each settlement to the WithSettleFunc
// callback. A visit never sleeps on an operation: what does not settle is
// rescheduled. Operations past the reconciliation deadline are flagged for
// review and then only queried, once a day. Due operations are visited
// WithResumeConcurrency at a time, so one slow server answer does not hold
// up the rest.
//
// Run returns ctx.Err() when ctx ends, ErrClosed when the Client is
// closed, or an error if the journal fails.
// Run one per Client.
func (c *Client) Run(ctx context.Context) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	ctx, release := c.bind(ctx, true)
	defer release()
	poll := min(c.cfg.reconcileInterval, 5*time.Second)
	var lastPrune time.Time
	for {
		if now := c.cfg.clock.Now(); c.cfg.retainSettled > 0 && now.Sub(lastPrune) >= pruneEvery {
			if _, err := c.Prune(ctx); err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return err
			}
			lastPrune = now
		}
		due, err := c.store.Due(ctx, c.cfg.clock.Now(), reconcileBatch)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("idem: reconcile: %w", err)
		}
		refs := make([]ref, len(due))
		for i, r := range due {
			refs[i] = ref{r.Scope, r.Key}
		}
		var journalErr error
		c.visitAll(ctx, refs, reconciling, func(_ *Result, err error) {
			if err != nil && journalErr == nil && isJournalErr(err) {
				journalErr = err
			}
		})
		if journalErr != nil {
			return journalErr
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if len(due) == reconcileBatch {
			continue // more are due now
		}
		if err := c.cfg.clock.Sleep(ctx, poll); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
	}
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
