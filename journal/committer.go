package journal

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// maxRound bounds one round: a leader commits at most this many writes in
// one transaction and leaves the rest to the next leader.
const maxRound = 1024

// A request is one write waiting for the committer.
type request struct {
	// run applies the write inside the round's transaction. An ordinary
	// error (not found, invalid, fn's own error) must leave the transaction
	// untouched; run reports a bbolt failure after it may have written
	// something as a *txFailure, and the committer then fails that request
	// and commits the rest of the round without it.
	run func(tx *bolt.Tx, r *request) error

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
// commits them in one bbolt Update, so one fsync serves the whole round,
// and releases their writers. Writes that arrive meanwhile queue; when the
// round is done the leader hands the lead to the oldest of them, whose
// round holds everything that queued during the commit, and returns. A
// lone writer therefore commits at once, on its own goroutine, with no
// hand-off to another goroutine and back. bbolt's Batch is not used: it
// waits up to 10 ms for company and may run a function twice.
//
// Invariant, under mu: busy is false only when queue is empty.
type committer struct {
	db     *bolt.DB
	rounds atomic.Int64 // transactions begun, for tests
	// failCommit, when set by a test, stands in for db.Update to fail a
	// commit at a chosen step.
	failCommit func(db *bolt.DB, fn func(*bolt.Tx) error) error

	mu      sync.Mutex
	queue   []*request    // waiting writes, oldest first; queue[0] leads next
	spare   []*request    // the last round's slice, for reuse
	busy    bool          // a leader is committing, or has been handed the lead
	closed  bool          // stop was called: no more writes are taken
	drained chan struct{} // closed when busy ends after stop
}

func newCommitter(db *bolt.DB) *committer {
	return &committer{db: db}
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

// commit applies the round in one transaction and releases its callers.
func (c *committer) commit(round []*request) {
	c.rounds.Add(1)
	txid := 0 // the round's transaction, once begun
	err := c.update(func(tx *bolt.Tx) error {
		txid = tx.ID()
		for _, r := range round {
			r.panicked = nil
			r.err = r.run(tx, r)
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
				r.release()
			} else {
				rest = append(rest, r)
			}
		}
		if len(rest) > 0 {
			c.commit(rest)
		}
		return
	default:
		err = c.afterFailure(txid, err)
		if err == nil {
			break // the round is committed and durable after all
		}
		// Nothing of the round is known to be durable, so no request may
		// report success. Outcomes computed on top of the round's other
		// writes (ErrExists, ErrTerminal, fn's own decisions) are void
		// too: when the round's fate is unknown, so is theirs.
		for _, r := range round {
			r.err, r.panicked = err, nil
		}
	}
	for _, r := range round {
		r.release()
	}
}

// update runs fn in a write transaction and commits it.
func (c *committer) update(fn func(*bolt.Tx) error) error {
	if c.failCommit != nil {
		return c.failCommit(c.db, fn)
	}
	tuneFreelist(c.db)
	return c.db.Update(fn)
}

// afterFailure finds out what a failed commit of transaction txid left
// behind, and returns the error its round's requests get: err itself when
// nothing was committed, nil when the round turns out committed and
// durable, or an error matching ErrMaybeCommitted when nobody can tell.
//
// bbolt's Commit writes the transaction's pages, fsyncs them, writes the
// meta page that makes them the current tree, and fsyncs again; on any
// error it rolls back its in-memory state and returns the error. A
// failure before the meta page was written leaves the old tree current:
// nothing was committed. A failure after it (the last fsync, or a meta
// write that reached the page cache before failing) leaves the new meta
// page in the page cache, where bbolt reads it through its memory map:
// every later read in this process sees the round, a later commit builds
// on it, and the file may or may not hold it after a crash. Answering
// "failed" then invites a caller to retry under a new key while the
// reconciler sends the journaled one: two orders.
func (c *committer) afterFailure(txid int, err error) error {
	if txid == 0 {
		return err // Begin failed: nothing was written
	}
	current, verr := c.currentTx()
	switch {
	case verr != nil:
		return errorf("%w: the commit failed (%w), and reading the journal back failed too (%v)", ErrMaybeCommitted, err, verr)
	case current < txid:
		return err
	}
	// The round is visible. Its pages were fsync'd before its meta page
	// was written, so only that meta page may be missing on disk: a later
	// meta page, fsync'd, that points at the same tree makes the round
	// durable. An empty transaction commits exactly that (bbolt commits a
	// new freelist page and a new meta page even when nothing changed).
	cerr := c.update(func(*bolt.Tx) error { return nil })
	if cerr == nil {
		return nil
	}
	return errorf("%w: the commit failed (%w) after the journal had taken it, and a second commit to make it durable failed too (%v)", ErrMaybeCommitted, err, cerr)
}

// currentTx returns the id of the journal's current transaction, as a new
// read transaction sees it. bbolt can panic on a damaged meta page; that
// is an error here, not a crash.
func (c *committer) currentTx() (id int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errorf("bbolt: %v", p)
		}
	}()
	err = c.db.View(func(tx *bolt.Tx) error {
		id = tx.ID()
		return nil
	})
	return id, err
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
