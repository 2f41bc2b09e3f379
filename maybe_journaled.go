package idem

import (
	"sync"
	"sync/atomic"
)

// maxMaybeJournaled bounds the keys a Client remembers as maybe
// journaled: past it, the oldest is forgotten for each new one, an
// unknown outcome's before any lost commit's. A lost commit answer is an
// outage's, and each caller in flight then holds one key; an unknown
// outcome is any call's that ends so, and most are never retried.
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
	// keys: whether the create's commit answer was lost (the journal may
	// not hold it; else an earlier call ended unknown), and when the key
	// came (seq), so that the bound forgets the oldest. Not a random one:
	// a key whose retry is seconds away, forgotten for a newer call's
	// timeout, was told "nothing was journaled" (1 in 64 keys of a full
	// set, 64 calls ending unknown before its retry).
	keys map[opID]maybeKey
	seq  uint64
}

// maybeKey is what maybeJournaled holds of one key.
type maybeKey struct {
	lostCommit bool
	seq        uint64
}

// add remembers id; lostCommit says why (see keys). A key already held
// as a lost commit stays one.
func (m *maybeJournaled) add(id opID, lostCommit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = make(map[opID]maybeKey)
	}
	was, ok := m.keys[id]
	if !ok && len(m.keys) >= maxMaybeJournaled {
		delete(m.keys, m.oldest())
	}
	m.seq++
	m.keys[id] = maybeKey{lostCommit: was.lostCommit || lostCommit, seq: m.seq}
	m.n.Store(int32(len(m.keys)))
}

// oldest returns, under mu, the key the bound forgets: the oldest unknown
// outcome's, or if every key held is a lost commit's, the oldest of
// those. A scan of the full set, made only when it is full: a set that
// full is an outage's.
func (m *maybeJournaled) oldest() opID {
	var pick opID
	var at maybeKey
	found := false
	for id, k := range m.keys {
		better := !found ||
			(at.lostCommit && !k.lostCommit) ||
			(at.lostCommit == k.lostCommit && k.seq < at.seq)
		if better {
			pick, at, found = id, k, true
		}
	}
	return pick
}

// has reports whether id's create may have been journaled by an earlier
// call, and whether that call's commit answer was lost.
func (m *maybeJournaled) has(id opID) (held, lostCommit bool) {
	if m.n.Load() == 0 {
		return false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k, held := m.keys[id]
	return held, k.lostCommit
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
