package journal

import (
	"errors"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// queueSize bounds both the queue and one round: a round never holds more
// writes than were waiting when it started.
const queueSize = 1024

// A request is one write waiting for the committer.
type request struct {
	// run applies the write inside the round's transaction. An ordinary
	// error (not found, invalid, fn's own error) must leave the transaction
	// untouched; run reports a bbolt failure after it may have written
	// something as a *txFailure, and the committer then fails that request
	// and commits the rest of the round without it.
	run func(tx *bolt.Tx) error

	err      error
	panicked any           // a panic in the caller's fn, re-raised by the caller
	done     chan struct{} // closed when err is final
}

// txFailure marks an error from bbolt itself in the middle of a write: the
// transaction may hold part of the request, so it must not commit.
type txFailure struct{ err error }

func (f *txFailure) Error() string { return f.err.Error() }
func (f *txFailure) Unwrap() error { return f.err }

func failed(err error) error {
	if err == nil {
		return nil
	}
	return &txFailure{err}
}

// errPanicked stands in for the error of a request whose fn panicked.
var errPanicked = errors.New("journal: update function panicked")

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

// A committer shares commits between concurrent writers without a timer.
// It takes the first waiting write, drains every other write already
// queued (without waiting for more), and commits them all in one bbolt
// Update, so one fsync serves the whole round; writes that arrive during
// the commit form the next round. A lone writer therefore commits at once.
// bbolt's Batch is not used: it waits up to 10 ms for company and may run
// a function twice.
type committer struct {
	db      *bolt.DB
	queue   chan *request
	stopped chan struct{}
	rounds  atomic.Int64 // transactions begun, for tests
}

func newCommitter(db *bolt.DB) *committer {
	c := &committer{
		db:      db,
		queue:   make(chan *request, queueSize),
		stopped: make(chan struct{}),
	}
	go c.loop()
	return c
}

// loop runs until the queue is closed and drained.
func (c *committer) loop() {
	defer close(c.stopped)
	round := make([]*request, 0, queueSize)
	for first := range c.queue {
		round = append(round[:0], first)
	drain:
		for len(round) < queueSize {
			select {
			case r, ok := <-c.queue:
				if !ok {
					break drain
				}
				round = append(round, r)
			default:
				break drain
			}
		}
		c.commit(round)
		clear(round) // let finished requests be collected
	}
}

// commit applies the round in one transaction and releases its callers.
func (c *committer) commit(round []*request) {
	c.rounds.Add(1)
	err := c.db.Update(func(tx *bolt.Tx) error {
		for _, r := range round {
			r.panicked = nil
			r.err = r.run(tx)
			var f *txFailure
			if errors.As(r.err, &f) {
				return f
			}
		}
		return nil
	})
	var f *txFailure
	switch {
	case err == nil:
	case errors.As(err, &f):
		// One request broke the transaction (bbolt refused a Put), after
		// the requests before it had applied. It alone fails; the others
		// commit in a round of their own, so their functions run again on
		// fresh copies. This only happens when bbolt itself fails a write.
		var rest []*request
		for _, r := range round {
			var g *txFailure
			if errors.As(r.err, &g) && g == f {
				r.err = f.err
				close(r.done)
			} else {
				rest = append(rest, r)
			}
		}
		if len(rest) > 0 {
			c.commit(rest)
		}
		return
	default:
		// Begin or Commit failed: nothing of the round is known to be
		// durable, so no request may report success.
		for _, r := range round {
			if r.err == nil {
				r.err = err
			}
		}
	}
	for _, r := range round {
		close(r.done)
	}
}

// stop drains the queue and waits for the last commit. The caller must
// make sure nothing is enqueued afterwards.
func (c *committer) stop() {
	close(c.queue)
	<-c.stopped
}
