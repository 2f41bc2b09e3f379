package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// workerStopTimeout bounds how long abandoned workers may take to return
// after the crash; they only have to notice their cancelled context.
const workerStopTimeout = 30 * time.Second

// submitAll submits every order not yet acknowledged by the journal, from
// workers goroutines. With crashAt > 0 it "crashes" once crashAt orders were
// answered: it cancels the workers' context, abandoning their calls
// mid-attempt, and closes the client at once, as a dying process would.
// It reports whether it crashed.
func submitAll(ctx context.Context, c *idem.Client, baseURL string, orders []*order, workers, crashAt int, cnt *counters) (bool, error) {
	var todo []*order
	for _, o := range orders {
		if !o.acked {
			todo = append(todo, o)
		}
	}
	wctx, crash := context.WithCancel(ctx)
	defer crash()
	crashed := make(chan struct{})
	var crashOnce sync.Once
	answered := 0
	var mu sync.Mutex // guards answered

	jobs := make(chan *order)
	go func() {
		defer close(jobs)
		for _, o := range todo {
			select {
			case jobs <- o:
			case <-wctx.Done():
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for range min(workers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range jobs {
				if submitOne(wctx, c, baseURL, o, cnt) && crashAt > 0 {
					mu.Lock()
					answered++
					n := answered
					mu.Unlock()
					if n == crashAt {
						crashOnce.Do(func() { crash(); close(crashed) })
					}
				}
			}
		}()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	select {
	case <-allDone:
		return false, ctx.Err()
	case <-crashed:
	}
	// The process dies: the journal is closed under the workers' feet.
	// Nothing is settled by hand; the next process must cope.
	closeErr := c.Close()
	select {
	case <-allDone:
	case <-time.After(workerStopTimeout):
		return true, fmt.Errorf("workers still running %v after the crash", workerStopTimeout)
	}
	if closeErr != nil {
		return true, fmt.Errorf("close at the crash: %w", closeErr)
	}
	return true, ctx.Err()
}

// submitOne submits one order and records how the call ended. It reports
// whether the order was answered (settled, or handed to the reconciler)
// rather than abandoned by the crash.
func submitOne(ctx context.Context, c *idem.Client, baseURL string, o *order, cnt *counters) bool {
	cnt.inFlight.Add(1)
	defer cnt.inFlight.Add(-1)
	res, err := c.Submit(ctx, idem.Request{
		Key:  o.key,
		Ref:  o.ref,
		URL:  baseURL + "/orders",
		Body: o.body,
	})
	if res != nil {
		o.acked = true // journaled: from now on the journal owns it
	}
	switch {
	case ctx.Err() != nil && (err != nil || res == nil):
		// The crash caught it mid-call. Its outcome is whatever the
		// journal says; the next process will find out.
		o.outcome = "abandoned"
		return false
	case err == nil || errors.Is(err, idem.ErrFailed):
		o.outcome = "settled"
		cnt.done.Add(1)
		return true
	case errors.Is(err, idem.ErrUnknownOutcome):
		// Not a failure: journaled, and Run will settle it.
		o.outcome = "handed off"
		cnt.done.Add(1)
		return true
	default:
		o.outcome = "error"
		o.err = err
		cnt.done.Add(1)
		return true
	}
}

// openStates are the states Run still works on.
var openStates = []idem.State{idem.StatePending, idem.StateProcessing, idem.StateUnknown}

// waitSettled polls the journal until no open operation is left without a
// review reason, or timeout passes. It returns an error only if the journal
// cannot be read or ctx ends; whatever is still open is counted by count.
func waitSettled(ctx context.Context, c *idem.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		open, err := c.List(ctx, idem.Filter{States: openStates})
		if err != nil {
			return err
		}
		unflagged := 0
		for _, op := range open {
			if op.Review == "" {
				unflagged++
			}
		}
		if unflagged == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// count fills sum from the journal, the client's counters and the fake
// server's side-effect counters.
func count(ctx context.Context, sum *summary, c *idem.Client, srv *idemtest.Server, orders []*order, cnt *counters) error {
	effects := 0
	for _, o := range orders {
		switch o.outcome {
		case "settled":
			sum.SettledAtOnce++
		case "handed off":
			sum.HandedOff++
		}
		if o.err != nil && len(sum.Errors) < 3 {
			sum.Errors = append(sum.Errors, fmt.Sprintf("%s: %v", o.ref, o.err))
		}
		e := srv.Effects(authorization, o.key)
		effects += e
		sum.Duplicates += max(0, e-1)
		if !o.acked {
			sum.NotSubmitted++
			continue
		}
		op, err := c.Lookup(ctx, journalScope, o.key)
		if errors.Is(err, idem.ErrNotFound) {
			sum.Lost++ // acknowledged, yet not in the journal
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", o.ref, err)
		}
		sum.Operations++
		switch {
		case op.State == idem.StateSucceeded:
			sum.Succeeded++
			if e == 0 {
				sum.Disagree++ // succeeded, but the server has no order
			}
		case op.State == idem.StateFailed:
			sum.Failed++
			if e > 0 {
				sum.Disagree++ // failed, but the server made the order
			}
		case op.Review != "":
			sum.Open++
			sum.Review++
		default:
			sum.Open++
			sum.Lost++ // open, and nobody is told to look at it
			if len(sum.OpenSamples) < 3 {
				// Run stopped at the settle timeout, so the due time may be past.
				due := "next due in " + time.Until(op.NextDue).Round(time.Millisecond).String()
				if late := time.Since(op.NextDue); late > 0 {
					due = "overdue by " + late.Round(time.Millisecond).String()
				}
				sum.OpenSamples = append(sum.OpenSamples, fmt.Sprintf("%s (key %s): %s after %d attempts, %s",
					o.ref, o.key, op.State, op.Attempts, due))
			}
		}
	}
	sum.SettledInBackground = int(cnt.settledBackground.Load())
	sum.Attempts = int(cnt.attempts.Load())
	sum.Queries = int(cnt.queries.Load())
	sum.Server = srv.Stats()
	sum.MaxEffectsPerKey = sum.Server.MaxEffectsPerKey
	if stray := sum.Server.SideEffects - effects; stray != 0 {
		sum.Disagree += stray // orders under keys the demo never chose
	}
	return nil
}
