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
	// (not found, invalid, fn's own error) drops what it staged.
	run func(v *view, r *request) error

	err      error
	panicked any // a panic in the caller's fn, re-raised by the caller
	// claim, set by a create's run, is the lease (owner, expiry) its
	// creator takes with the record; the committer grants it, into
	// *lease, once the round is durable and before anyone can see the
	// record (CreateClaimed).
	claim *Lease
	lease *Lease
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
//
// Rounds overlap by one: once a round has its writes and the previous
// round has ended, it hands the lead on and then writes and syncs, while
// the next round carries its requests out against the overlay and the
// writes still being synced (the only ones its view adds to what readers
// see). The log itself is written as without the overlap, one round at a
// time, each durable before the next is written: a crash leaves at most
// the last round torn, as recovery expects. A round that ends failed
// voids what the next one computed on top of it: the next round runs its
// requests again (their functions may run twice).
type committer struct {
	s      *Store
	q      groupcommit.Queue[*request]
	rounds atomic.Int64 // rounds begun, for tests
	// last is the latest round to have written, or to be writing: the
	// next round reads its writes while it is in flight, and waits for it
	// to end before it writes. Only the leader reads or sets it; the
	// queue's hand-off orders one leader after the other.
	last *flight
}

// A flight is a round's writes while they are written and synced.
type flight struct {
	staged map[string]*logged
	done   chan struct{} // closed once ok is final and the writes are published (ok) or void
	ok     bool
}

// inFlight returns f's writes (a non-nil map, if empty) while f has not
// ended, or nil.
func (f *flight) inFlight() map[string]*logged {
	if f == nil {
		return nil
	}
	select {
	case <-f.done:
		return nil
	default:
		return f.staged
	}
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
func (c *committer) commit(round []*request, lead *groupcommit.Lead[*request]) {
	c.rounds.Add(1)
	s := c.s
	prev := c.last
	v := c.newView(prev)
	c.run(v, round)
	if v.prev != nil {
		<-prev.done
		if !prev.ok && v.readPrev {
			// What the requests computed on top of the previous round's
			// writes is void with them: run them again, on what is.
			v = c.newView(nil)
			c.run(v, round)
		}
		// The previous round is published or void: the overlay says
		// which. The writers that queued while it synced join this
		// round, so that its one write serves them too.
		v.prev = nil
		if more := lead.More(maxRound - len(round)); len(more) > 0 {
			c.run(v, more)
			round = append(round, more...)
		}
	}
	staged := v.staged
	if staged == nil {
		staged = map[string]*logged{} // non-nil: in flight, if empty (inFlight)
	}
	me := &flight{staged: staged, done: make(chan struct{})}
	c.last = me
	// The next round may now run its requests, against me.staged too,
	// while this one writes; it writes only once me.done is closed.
	lead.HandOff()
	defer close(me.done) // after the writers' release: see below
	if err := s.backPressure(); err != nil {
		// Nothing of the round is written: the log may not outgrow what
		// the file can take.
		for _, r := range round {
			r.err = err
			r.Release()
		}
		return
	}
	writes := v.writes()
	if len(writes) == 0 {
		me.ok = true
	} else {
		payloads := make([][]byte, len(writes))
		for i, w := range writes {
			payloads[i] = w.enc
		}
		first, err := s.log.append(payloads)
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
			me.ok = true
			s.kickApplier()
		}
	}
	// The writers are released before the next leader, waiting on
	// me.done, is woken (the deferred close): Go's scheduler runs the
	// goroutine readied last first, so the next round writes as soon as
	// this goroutine yields, not after every released writer has run.
	for _, r := range round {
		r.Release()
	}
}

// newView returns a view for a round, which also reads the writes of prev
// if prev is in flight (v.prev is then non-nil, if empty).
func (c *committer) newView(prev *flight) *view {
	v := c.s.newView()
	v.prev = prev.inFlight()
	return v
}

// run carries out requests against v, which holds what they staged.
func (c *committer) run(v *view, requests []*request) {
	for _, r := range requests {
		r.panicked = nil
		r.err = r.run(v, r)
		v.settle(r.err == nil)
	}
}
