package journal

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// maxRound bounds one round: a leader commits at most this many writes in
// one log write and leaves the rest to the next leader.
const maxRound = 1024

// A request is one write waiting for the committer.
type request struct {
	// run carries out the write against the round's view: it reads what it
	// needs and, as its last step, stages its write (view.put). An error
	// (not found, invalid, fn's own error) drops what it staged.
	run func(v *view, r *request) error

	err      error
	panicked any           // a panic in the caller's fn, re-raised by the caller
	done     chan struct{} // closed when err is final, or when lead is set
	lead     bool          // set before done is closed: commit the next round
	released bool          // release was called
}

// release lets r's writer return, unless r's writer is the leader, whose
// done was closed to hand it the lead.
func (r *request) release() {
	r.released = true
	if !r.lead {
		close(r.done)
	}
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
// and without a goroutine of its own (group commit with a leader, as in
// LevelDB's write queue). A writer that finds no commit in progress leads:
// on its own goroutine it takes every write queued so far (its own first),
// carries them out against one view of the journal, appends them to the
// log in one write, so one fdatasync serves the whole round, publishes
// them to the overlay and releases their writers. Writes that arrive meanwhile queue; when the
// round is done the leader hands the lead to the oldest of them, whose
// round holds everything that queued during the commit, and returns. A
// lone writer therefore commits at once, on its own goroutine, with no
// hand-off to another goroutine and back. bbolt's Batch is not used: it
// waits up to 10 ms for company and may run a function twice.
//
// Invariant, under mu: busy is false only when queue is empty.
type committer struct {
	s      *Store
	rounds atomic.Int64 // rounds begun, for tests

	mu      sync.Mutex
	queue   []*request    // waiting writes, oldest first; queue[0] leads next
	spare   []*request    // the last round's slice, for reuse
	busy    bool          // a leader is committing, or has been handed the lead
	closed  bool          // stop was called: no more writes are taken
	drained chan struct{} // closed when busy ends after stop
}

func newCommitter(s *Store) *committer {
	return &committer{s: s}
}

// do carries out r in a round and returns when r's error is final. It
// returns ErrClosed, without running r, once stop has been called.
func (c *committer) do(r *request) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.queue = append(c.queue, r)
	if c.busy {
		c.mu.Unlock()
		<-r.done
		if !r.lead {
			return nil
		}
		c.mu.Lock()
	}
	c.busy = true
	c.lead()
	return nil
}

// lead commits one round, everything queued up to maxRound, then hands the
// lead to the oldest write queued meanwhile, or clears busy if there is
// none. It is called with mu held and busy set, by the writer at the head
// of the queue, and returns with mu released.
func (c *committer) lead() {
	var round []*request
	if len(c.queue) <= maxRound {
		round, c.queue, c.spare = c.queue, c.spare[:0], nil
	} else {
		round = slices.Clone(c.queue[:maxRound])
		c.queue = slices.Delete(c.queue, 0, maxRound)
	}
	c.mu.Unlock()

	// A panic that gets here comes from bbolt or from the journal itself
	// (protect stops those of the callers' functions). It must not unwind
	// into this writer's caller, which might recover it and leave every
	// queued writer waiting forever, with the transaction's fate unknown:
	// like the panic of a dedicated committer goroutine, it ends the
	// process.
	finished := false
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("journal: commit panicked: %v\n\n%s", p, debug.Stack())
			go panic(msg)
			select {}
		}
		if !finished {
			// runtime.Goexit in a caller's function is unwinding this
			// goroutine; bbolt has rolled the transaction back. Fail what
			// is left of the round and pass the lead on, or every writer
			// waits forever.
			for _, r := range round {
				if !r.released {
					r.err = errGoexit
					r.release()
				}
			}
			c.handOff(round)
		}
	}()
	c.commit(round)
	finished = true
	c.handOff(round)
}

// handOff ends a round: it hands the lead to the oldest queued write, or
// clears busy.
func (c *committer) handOff(round []*request) {
	clear(round) // let finished requests be collected
	c.mu.Lock()
	if c.spare == nil && cap(round) <= 2*maxRound {
		c.spare = round[:0]
	}
	if len(c.queue) == 0 {
		c.busy = false
		if c.drained != nil {
			close(c.drained)
			c.drained = nil
		}
		c.mu.Unlock()
		return
	}
	next := c.queue[0]
	next.lead = true
	c.mu.Unlock()
	close(next.done)
}

// commit carries out the round, logs its writes and releases its callers.
func (c *committer) commit(round []*request) {
	c.rounds.Add(1)
	s := c.s
	if err := s.backPressure(); err != nil {
		// Nothing of the round is written: the log may not outgrow what
		// the file can take.
		for _, r := range round {
			r.err = err
			r.release()
		}
		return
	}
	writes := c.run(round)
	if len(writes) > 0 {
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
			s.ov.publish(writes)
			s.kickApplier()
		}
	}
	for _, r := range round {
		r.release()
	}
}

// run carries out the round's requests against one view and returns the
// writes they staged, in order.
func (c *committer) run(round []*request) []*logged {
	v := c.s.newView()
	for _, r := range round {
		r.panicked = nil
		r.err = r.run(v, r)
		v.settle(r.err == nil)
	}
	return v.writes()
}

// stop makes every later write fail with ErrClosed and waits until the
// writes already queued have committed.
func (c *committer) stop() {
	c.mu.Lock()
	c.closed = true
	if !c.busy {
		c.mu.Unlock()
		return
	}
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	drained := c.drained
	c.mu.Unlock()
	<-drained
}
