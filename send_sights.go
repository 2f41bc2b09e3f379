package idem

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/journal"
)

// sendSights are, per open operation, the last send that may have
// executed this process knows of, and the time by this process's clock
// from which it counts that send's result lag: for a send it made, the
// send's start; for one another process sharing the journal made while
// this one lived (a replica on PostgreSQL), the time this process first
// read it. A send journaled by another replica is stamped by that
// replica's clock, which may run minutes behind ours (leases are judged
// by the database's clock: nothing else keeps such replicas apart);
// read by our clock its send looked minutes old, the result lag over at
// once, and a client order id whose market order had filled (Binance's
// -2013 while its read path lags) was resent and placed a second order.
// A send stamped before this process began, which resultLagging counts
// from born, is noted too: stamped by a clock running behind ours, it
// may have been made after born (a replica started a minute before
// another, two minutes behind, sent).
// Kept in memory only: a restarted process reads every send afresh.
type sendSights struct {
	mu    sync.Mutex
	n     atomic.Int32 // len(m): most drives end with none to forget
	m     map[opID]sendSight
	swept int // len(m) after the last sweep
}

// sendSight is one operation's entry in sendSights.
type sendSight struct {
	number int       // the send's attempt number
	start  time.Time // its Start as journaled: the send, not another of a key used again
	at     time.Time // the lag counts from no earlier than this
}

// of reports whether e is of a send of rec's: a key used again after its
// operation was settled elsewhere (Confirm, another replica) and pruned
// starts its attempts over, and an entry of the old operation's, its
// number no lower, had the new one's send skipped, its lag counted from
// the old read.
func (e sendSight) of(rec *journal.Record) bool {
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		if a := rec.Attempts[i]; a.Number == e.number {
			return a.Start.Equal(e.start)
		}
	}
	return false
}

// lastSend returns rec's last attempt that may have executed, if any.
func lastSend(rec *journal.Record) (journal.Attempt, bool) {
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		if maybeExecuted(rec.Attempts[i]) {
			return rec.Attempts[i], true
		}
	}
	return journal.Attempt{}, false
}

// read notes rec's last send that may have executed as read at now by a
// drive about to start on it, unless this process knows it already (it
// made it, or read it before). keep bounds how long an entry may matter
// (sweep).
func (s *sendSights) read(rec *journal.Record, now time.Time, keep time.Duration) {
	if a, ok := lastSend(rec); ok {
		s.readSend(rec, a, now, keep)
	}
}

// readSend is read of a, rec's last send that may have executed.
func (s *sendSights) readSend(rec *journal.Record, a journal.Attempt, now time.Time, keep time.Duration) {
	id := opID{rec.Scope, rec.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[id]; ok && e.number >= a.Number && e.of(rec) {
		return
	}
	s.put(id, sendSight{a.Number, a.Start, now}, now, keep)
}

// listed is read for rec as Resume lists it, before any drive: a send
// Resume's drives defer (a host down, its share spent) counts from then,
// not from a later visit's read. Only a send whose outcome is journaled:
// one still under way when listed may go out after it, and is left to
// the drive's read, under the lease.
func (s *sendSights) listed(rec *journal.Record, now time.Time, keep time.Duration) {
	if a, ok := lastSend(rec); ok && a.Done {
		s.readSend(rec, a, now, keep)
	}
}

// made notes rec's last send that may have executed as this process's
// own, counted from its start, at the end of a drive that left the
// operation open, if the drive made it (numbered past before, the last
// attempt when the drive began): if every send of the drive's was
// answered as not executed, the last that may have is the one read
// before, whose entry stays.
func (s *sendSights) made(rec *journal.Record, before int, now time.Time, keep time.Duration) {
	a, ok := lastSend(rec)
	if !ok || a.Number <= before {
		return
	}
	id := opID{rec.Scope, rec.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[id]; ok && e.number > a.Number {
		// Read since this drive released the operation: another
		// replica's newer send, whose read this must not undo (or an
		// old operation's of the key, which since passes over; this
		// send, our own, resultLagging counts by our clock).
		return
	}
	s.put(id, sendSight{a.Number, a.Start, a.Start}, now, keep)
}

// put stores e for id (s.mu held), sweeping when the map has doubled
// since the last sweep.
func (s *sendSights) put(id opID, e sendSight, now time.Time, keep time.Duration) {
	if s.m == nil {
		s.m = map[opID]sendSight{}
	}
	s.m[id] = e
	if len(s.m) >= max(2*s.swept, 1024) {
		s.sweep(now, keep)
	}
	s.n.Store(int32(len(s.m)))
}

// sweep drops the entries older than keep (s.mu held): those of
// operations another replica settled, which this process never visits
// again. keep is the reconciler's deadline, past which no operation is
// resent.
func (s *sendSights) sweep(now time.Time, keep time.Duration) {
	for id, e := range s.m {
		if now.Sub(e.at) > keep {
			delete(s.m, id)
		}
	}
	s.swept = len(s.m)
}

// forget drops the entry of an operation this process settled.
func (s *sendSights) forget(scope, key string) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, opID{scope, key})
	s.n.Store(int32(len(s.m)))
}

// since returns the time from which rec's last send that may have
// executed counts its lag, if this process holds one for it; zero
// otherwise. A read's time keeps its monotonic reading, so that sweep
// measures its age with no step of the wall clock in it (a step forward
// past keep swept a hold a minute old, and the "not found" went
// through); lagging, which takes the wall clock's steps since from it,
// reads it by the wall clock alone.
func (s *sendSights) since(rec *journal.Record) time.Time {
	if s.n.Load() == 0 {
		return time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[opID{rec.Scope, rec.Key}]; ok && e.of(rec) {
		return e.at
	}
	return time.Time{}
}
