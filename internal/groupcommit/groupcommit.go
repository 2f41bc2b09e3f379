// Package groupcommit shares commits between concurrent writers, without a
// timer and without a goroutine of its own: group commit with a leader, as
// in LevelDB's write queue. A writer that finds no round in progress
// leads one on its own goroutine: it takes every request queued so far
// (its own first), commits them together, so that one flush serves the
// whole round, and releases their writers. Requests that arrive meanwhile
// queue; when the round is done the leader hands the lead to the oldest of
// them, whose round holds everything that queued during the commit, and
// returns. A lone writer therefore commits at once, on its own goroutine,
// with no hand-off to another goroutine and back. A queued writer whose
// context ends leaves the queue (DoContext): it does not wait for the
// rounds ahead of it.
//
// Journals use it (pgjournal: one PostgreSQL transaction per round);
// what a round does with its requests is theirs.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
)

// Slot is what a request embeds to be queued: its writer waits on it until
// the round that carries the request releases it.
type Slot struct {
	// done is closed when the outcome is final, or when lead is set. Only
	// a writer that queues behind a round waits on it, so only such a
	// writer makes it: a writer that leads at once has none (nil), and an
	// allocation fewer per write.
	done     chan struct{}
	lead     bool // set before done is closed: lead the next round
	released bool
}

func (s *Slot) slot() *Slot { return s }

// Release makes the request's outcome final and lets its writer return
// (the leader's own request returns with its round). A round releases
// each of its requests once.
func (s *Slot) Release() {
	s.released = true
	if !s.lead && s.done != nil {
		close(s.done)
	}
}

// Released reports whether the request was released.
func (s *Slot) Released() bool { return s.released }

// A Request is a pointer to a struct that embeds Slot.
type Request interface{ slot() *Slot }

// Queue runs the requests of its writers in rounds. Set its fields before
// the first Do; its zero Max means rounds of any size.
//
// Invariant, under mu: busy is false only when queue is empty.
type Queue[R Request] struct {
	// Max bounds a round: a leader takes at most this many requests and
	// leaves the rest to the next leader.
	Max int
	// Commit carries out a round, on the leader's goroutine, and releases
	// every request of it: there, or later on goroutines of its own,
	// while the next round runs (the leader's writer returns when Commit
	// does). The round slice is the Queue's, and a later round's once
	// Commit returns: Commit may keep its requests, not the slice. A
	// function of a caller's that it calls may
	// call runtime.Goexit (t.FailNow in a test): Commit must then have
	// written nothing for the requests it has not released.
	Commit func(round []R)
	// Abandon fails and releases a request Commit left unreleased when a
	// caller's function ended the leader's goroutine with runtime.Goexit.
	Abandon func(r R)
	// Name prefixes the message of a panic in Commit, which ends the
	// process (see Do).
	Name string

	mu      sync.Mutex
	queue   []R
	spare   []R           // a round's slice once its Commit returned, for the next round's
	busy    bool          // a leader is committing, or has been handed the lead
	closed  bool          // Stop was called: no more requests are taken
	drained chan struct{} // closed when busy ends after Stop
}

// ErrStopped is DoContext's error after Stop: the request was not run.
var ErrStopped = errors.New("groupcommit: stopped")

// Do queues r and returns once a round has released it, or false at once,
// without running r, after Stop.
//
// A panic in Commit (not one of a caller's functions: Commit recovers
// those itself) must not unwind into the leader's caller, which might
// recover it and leave every queued writer waiting for ever, with the
// round's fate unknown: like the panic of a dedicated committer
// goroutine, it ends the process.
func (q *Queue[R]) Do(r R) bool {
	return q.DoContext(context.Background(), r) == nil
}

// DoContext is Do, except that r leaves the queue when ctx ends before a
// round has taken it: DoContext then returns ctx's error at once, and r
// was not run, not even in part. Queued behind rounds that each wait
// (for a locked row, say), a writer would otherwise wait for all of them
// whatever its deadline. Once a round has taken r, DoContext waits for
// its release, as Do does: the round may be writing it. It returns
// ErrStopped, without running r, after Stop, and ctx's error, without
// queuing r, if ctx has ended already.
func (q *Queue[R]) DoContext(ctx context.Context, r R) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := r.slot()
	s.done, s.lead, s.released = nil, false, false
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrStopped
	}
	if q.busy {
		// Made under mu, before r is queued: whoever takes r from the
		// queue (a leader releasing it, handOffLocked) does so under mu
		// and sees it.
		s.done = make(chan struct{})
	}
	q.queue = append(q.queue, r)
	if q.busy {
		q.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			if q.leave(s) {
				return ctx.Err()
			}
			<-s.done // taken by a round: its outcome is the round's
		}
		if !s.lead {
			return nil
		}
		if ctx.Err() != nil && q.leave(s) {
			return ctx.Err()
		}
		q.mu.Lock()
	}
	q.busy = true
	q.lead()
	return nil
}

// leave takes s's request out of the queue if no round has taken it yet,
// and reports whether it did. Handed the lead meanwhile, it hands it on:
// a writer past its deadline does not lead a round of others' requests.
func (q *Queue[R]) leave(s *Slot) bool {
	q.mu.Lock()
	i := slices.IndexFunc(q.queue, func(r R) bool { return r.slot() == s })
	if i < 0 {
		q.mu.Unlock()
		return false
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	if !s.lead {
		q.mu.Unlock()
		return true
	}
	q.handOffLocked()
	return true
}

// Len is how many requests wait for a round.
func (q *Queue[R]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// lead commits one round, then hands the lead on. It is called with mu
// held and busy set, by the writer at the head of the queue, and returns
// with mu released.
func (q *Queue[R]) lead() {
	n := len(q.queue)
	if q.Max > 0 {
		n = min(n, q.Max)
	}
	// The previous round's slice, its Commit over (endRound): one leader
	// at a time, so no other round holds it.
	round := append(q.spare[:0], q.queue[:n]...)
	q.spare = nil
	q.queue = slices.Delete(q.queue, 0, n)
	q.mu.Unlock()

	finished := false
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("%s: commit panicked: %v\n\n%s", q.Name, p, debug.Stack())
			go panic(msg)
			select {}
		}
		if !finished {
			// runtime.Goexit in a caller's function is unwinding this
			// goroutine. Fail what is left of the round and pass the
			// lead on, or every writer waits for ever.
			for _, r := range round {
				if !r.slot().released {
					q.Abandon(r)
				}
			}
			q.endRound(round)
		}
	}()
	q.Commit(round)
	finished = true
	q.endRound(round)
}

// endRound keeps round's slice for the next round, holding none of its
// requests, and hands the lead on. A large round's slice is not kept.
func (q *Queue[R]) endRound(round []R) {
	clear(round)
	q.mu.Lock()
	if cap(round) <= maxSpare {
		q.spare = round[:0]
	}
	q.handOffLocked()
}

// maxSpare bounds the round slice a Queue keeps between rounds.
const maxSpare = 1024

// handOffLocked ends a round, called with mu held: it hands the lead to
// the oldest queued request, or clears busy. It releases mu.
func (q *Queue[R]) handOffLocked() {
	if len(q.queue) == 0 {
		q.busy = false
		if q.drained != nil {
			close(q.drained)
			q.drained = nil
		}
		q.mu.Unlock()
		return
	}
	next := q.queue[0].slot()
	next.lead = true
	q.mu.Unlock()
	close(next.done)
}

// Stop makes every later Do return false and waits until the requests
// already queued have been released.
func (q *Queue[R]) Stop() {
	q.mu.Lock()
	q.closed = true
	if !q.busy {
		q.mu.Unlock()
		return
	}
	if q.drained == nil {
		q.drained = make(chan struct{})
	}
	drained := q.drained
	q.mu.Unlock()
	<-drained
}
