package journal

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/internal/groupcommit"
)

// maxRound bounds one round: a leader commits at most this many writes in
// one log write and leaves the rest to the next leader.
const maxRound = 1024

// A request is one write waiting for the committer.
type request struct {
	groupcommit.Slot
	// run carries out the write against the round's view: it reads what it
	// needs and, as its last step, stages its write (view.put). An error
	// (not found, invalid, fn's own error) drops what it staged. op, when
	// set, does it instead: Create and Update embed the request in a
	// struct that holds what their run needs, one allocation per write
	// where a closure, the variables it assigns and the request were
	// three.
	run func(v *view, r *request) error
	op  writeOp

	err      error
	panicked any // a panic in the caller's fn, re-raised by the caller
	// claim, set by a create's run, is the lease (owner, expiry) its
	// creator takes with the record; the committer grants it, into
	// *lease, once the round is durable and before anyone can see the
	// record (CreateClaimed).
	claim *Lease
	lease *Lease
}

// A writeOp carries out a request as its run would.
type writeOp interface {
	run(v *view, r *request) error
}

// errPanicked stands in for the error of a request whose fn panicked.
var errPanicked = errors.New("journal: update function panicked")

// errGoexit fails the requests of a round whose leader was ended by
// runtime.Goexit in a caller's function.
var errGoexit = errors.New("journal: an update function called runtime.Goexit; nothing of its round was written")

// protect calls fn, turning a panic into errPanicked and the panic value,
// so that a caller's bug fails its own request, not the committer.
func protect(fn func(*Record) error, rec *Record) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked, err = p, errPanicked
		}
	}()
	return nil, fn(rec)
}

// A committer shares commits between concurrent writers without a timer
// and without a goroutine of its own (group commit with a leader,
// internal/groupcommit): the writer that leads a round carries its
// writes out against one view of the journal, appends them to the log in
// one write, so one fdatasync serves the whole round, publishes them to
// the overlay and releases their writers. A lone writer commits at once,
// on its own goroutine. bbolt's Batch is not used: it waits up to 10 ms
// for company and may run a function twice.
type committer struct {
	s      *Store
	q      groupcommit.Queue[*request]
	rounds atomic.Int64 // rounds begun, for tests
	// view and payloads are the round's, kept from one round to the next
	// (there is one round at a time): two allocations per round fewer.
	// Each round starts them afresh and ends by clearing them, so they
	// hold nothing of it once it is over.
	view     view
	payloads [][]byte
}

func newCommitter(s *Store) *committer {
	c := &committer{s: s}
	c.q.Max = maxRound
	c.q.Name = "journal"
	c.q.Commit = c.commit
	c.q.Abandon = func(r *request) {
		// runtime.Goexit in a caller's function ended the leader before
		// the round's log write: nothing of it was written.
		r.err = errGoexit
		r.Release()
	}
	return c
}

// do carries out r in a round and returns when r's error is final. It
// returns ErrClosed, without running r, once stop has been called.
func (c *committer) do(r *request) error {
	if !c.q.Do(r) {
		return ErrClosed
	}
	return nil
}

// stop makes every later write fail with ErrClosed and waits until the
// writes already queued have committed.
func (c *committer) stop() { c.q.Stop() }

// commit carries out the round, logs its writes and releases its callers.
func (c *committer) commit(round []*request) {
	c.rounds.Add(1)
	s := c.s
	// Once its writes are published (or failed), and when a caller's
	// fn ends the round with runtime.Goexit too: a Claim waits for it.
	defer s.leases.roundEnded()
	if err := s.backPressure(); err != nil {
		// Nothing of the round is written: the log may not outgrow what
		// the file can take.
		for _, r := range round {
			r.err = err
			r.Release()
		}
		return
	}
	writes := c.run(round)
	if len(writes) > 0 {
		if err := s.dependOnLog(); err != nil {
			c.view.reset(nil)
			for _, r := range round {
				r.err, r.panicked = err, nil
				r.Release()
			}
			return
		}
		// Under stopMu, so that once the applier has found the file gone
		// (apply) every round either is published before it copies the
		// overlay into the file, or writes nothing.
		s.stopMu.Lock()
		defer s.stopMu.Unlock()
		if s.stopping != nil {
			c.view.reset(nil)
			for _, r := range round {
				r.err, r.panicked = s.stopping, nil
				r.Release()
			}
			return
		}
		payloads := c.payloads[:0]
		for _, w := range writes {
			payloads = append(payloads, w.enc)
		}
		first, err := s.log.append(payloads)
		clear(payloads)
		if cap(payloads) <= 64 { // a large round's slice is not kept
			c.payloads = payloads
		}
		if err != nil {
			// Nothing of the round is known to be in the journal, so no
			// request may report success. Outcomes computed on top of the
			// round's other writes (ErrExists, ErrTerminal, fn's own
			// decisions) are void too: when the round's fate is unknown,
			// so is theirs.
			for _, r := range round {
				r.err, r.panicked = err, nil
			}
		} else {
			for i, w := range writes {
				w.lsn = first + uint64(i)
			}
			for _, r := range round {
				if r.err == nil && r.claim != nil {
					*r.lease = s.leases.grant(r.claim.Scope, r.claim.Key, r.claim.Owner, r.claim.Expires)
				}
			}
			s.ov.publish(writes, time.Now())
			s.kickApplier()
		}
	}
	c.view.reset(nil) // writes, a slice of it, is not read again
	for _, r := range round {
		r.Release()
	}
}

// run carries out the round's requests against one view and returns the
// writes they staged, in order: valid until the round's end (commit), when
// the view is cleared for the next round.
func (c *committer) run(round []*request) []*logged {
	v := &c.view
	v.reset(c.s)
	for _, r := range round {
		r.panicked = nil
		if r.op != nil {
			r.err = r.op.run(v, r)
		} else {
			r.err = r.run(v, r)
		}
		v.settle(r.err == nil)
	}
	return v.writes()
}
