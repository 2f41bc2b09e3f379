package idem

import (
	"sync"
	"sync/atomic"
)

// maxMaybeJournaled bounds the keys a Client remembers as maybe
// journaled: past it, one it holds is forgotten for each new one. A lost
// commit answer is an outage's, and each caller in flight then holds
// one key.
const maxMaybeJournaled = 4096

// maybeJournaled holds the keys whose create ended, in this process, with
// its commit's answer lost (journal.ErrMaybeCommitted), or whose Submit or
// Do ended in ErrUnknownOutcome, until a create of the key reaches the
// journal (made, or found there). The next create of such a key that
// fails before reaching the journal (the database still down) knows
// nothing of the earlier call: its plain error said "nothing was
// journaled", which the errors' contract reads as nothing will be sent,
// and a caller placed the order again under a new key while the first,
// journaled after all, was (or had been) sent: two orders.
type maybeJournaled struct {
	n  atomic.Int32 // len(keys): a Submit of a Client with none takes no lock
	mu sync.Mutex
	// keys: true when the create's commit answer was lost (the journal
	// may not hold it), false when an earlier call ended unknown.
	keys map[opID]bool
}

// add remembers id; lostCommit says why (see keys). A key already held
// as a lost commit stays one.
func (m *maybeJournaled) add(id opID, lostCommit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = make(map[opID]bool)
	}
	was, ok := m.keys[id]
	if !ok && len(m.keys) >= maxMaybeJournaled {
		for old := range m.keys {
			delete(m.keys, old)
			break
		}
	}
	m.keys[id] = was || lostCommit
	m.n.Store(int32(len(m.keys)))
}

// has reports whether id's create may have been journaled by an earlier
// call, and whether that call's commit answer was lost.
func (m *maybeJournaled) has(id opID) (held, lostCommit bool) {
	if m.n.Load() == 0 {
		return false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lostCommit, held = m.keys[id]
	return held, lostCommit
}

// forget drops id: a create of it reached the journal, which now says
// where the operation stands.
func (m *maybeJournaled) forget(id opID) {
	if m.n.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, id)
	m.n.Store(int32(len(m.keys)))
}
