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
// its commit's answer lost (journal.ErrMaybeCommitted), until a create of
// the key reaches the journal (made, or found there). The next create of
// such a key that fails before reaching the journal (the database still
// down) knows nothing of the first: its plain error said "nothing was
// journaled", which the errors' contract reads as nothing will be sent,
// and a caller placed the order again under a new key while the first
// create, committed after all, was sent by Resume or Run: two orders.
type maybeJournaled struct {
	n    atomic.Int32 // len(keys): a Submit of a Client with none takes no lock
	mu   sync.Mutex
	keys map[opID]struct{}
}

func (m *maybeJournaled) add(id opID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = make(map[opID]struct{})
	}
	if _, ok := m.keys[id]; !ok && len(m.keys) >= maxMaybeJournaled {
		for old := range m.keys {
			delete(m.keys, old)
			break
		}
	}
	m.keys[id] = struct{}{}
	m.n.Store(int32(len(m.keys)))
}

// has reports whether id's create may have been journaled by an earlier
// call.
func (m *maybeJournaled) has(id opID) bool {
	if m.n.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.keys[id]
	return ok
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
