package fakeserver

import (
	"container/list"
	"net/http"
	"time"
)

// Operation states, as they appear in response bodies.
const (
	stateProcessing = "processing"
	stateSucceeded  = "succeeded"
	stateFailed     = "failed"
)

type scopeKey struct{ scope, key string }

// entry is one stored key: the commit and its result.
type entry struct {
	sk          scopeKey
	digest      [32]byte
	committedAt time.Time
	resourceID  string
	state       string // stateSucceeded or stateFailed once processing ends
	reason      string
	effects     int

	// inFlight is true while the request that committed the entry has not
	// answered yet (the delay fault): repeats get 409.
	inFlight bool
	// doneAt ends slow processing; visibleAt ends query lag.
	doneAt, visibleAt time.Time
	// retryAfter and httpDate shape the Retry-After of the 409 while
	// processing.
	retryAfter time.Duration
	httpDate   bool
}

// result is the body of submit and query answers.
type result struct {
	State      string `json:"state"`
	ResourceID string `json:"resourceId,omitempty"`
	Key        string `json:"key"`
	Reason     string `json:"reason,omitempty"`
}

func (e *entry) processing(now time.Time) bool { return now.Before(e.doneAt) }

// expired reports whether the key's window has ended at now.
func (e *entry) expired(now time.Time, retention time.Duration) bool {
	return !now.Before(e.committedAt.Add(retention))
}

// result returns the entry's state as seen at now.
func (e *entry) result(now time.Time) result {
	state := e.state
	if e.processing(now) {
		state = stateProcessing
	}
	return result{State: state, ResourceID: e.resourceID, Key: e.sk.key, Reason: e.reason}
}

// response returns the stored response at now: 201 succeeded, 402 failed,
// 202 processing (see encodeJSON for the 500 it cannot reach).
func (e *entry) response(now time.Time) (int, []byte) {
	res := e.result(now)
	status := http.StatusCreated
	switch res.State {
	case stateProcessing:
		status = http.StatusAccepted
	case stateFailed:
		status = http.StatusPaymentRequired
	}
	return encodeJSON(status, res)
}

// store holds the keys, in commit order, and the side-effect counts of
// expired keys. It is guarded by Server.mu.
type store struct {
	entries map[scopeKey]*entry
	order   []*entry // commit order; entries may have been replaced
	// retired counts the side effects of expired keys, most recently
	// expired last, so Effects keeps counting across expiry. At most
	// maxRetired keys are remembered.
	retired    map[scopeKey]*list.Element
	retiredLRU *list.List // of *retiredCount
	maxRetired int
}

type retiredCount struct {
	sk      scopeKey
	effects int
}

func newStore(maxKeys int) store {
	return store{
		entries:    make(map[scopeKey]*entry),
		retired:    make(map[scopeKey]*list.Element),
		retiredLRU: list.New(),
		maxRetired: maxKeys,
	}
}

func (st *store) add(e *entry) {
	st.entries[e.sk] = e
	st.order = append(st.order, e)
}

// sweep forgets the entries committed at or before now-retention. Commits
// are appended in clock order, so expired entries are at the front.
func (st *store) sweep(now time.Time, retention time.Duration) {
	n := 0
	for n < len(st.order) && st.order[n].expired(now, retention) {
		e := st.order[n]
		if st.entries[e.sk] == e {
			delete(st.entries, e.sk)
			st.retire(e)
		}
		st.order[n] = nil
		n++
	}
	if n > 0 {
		st.order = st.order[n:]
		if cap(st.order) > 64 && len(st.order) < cap(st.order)/4 {
			st.order = append([]*entry(nil), st.order...)
		}
	}
}

func (st *store) retire(e *entry) {
	if e.effects == 0 {
		return
	}
	if el, ok := st.retired[e.sk]; ok {
		el.Value.(*retiredCount).effects += e.effects
		st.retiredLRU.MoveToBack(el)
		return
	}
	st.retired[e.sk] = st.retiredLRU.PushBack(&retiredCount{sk: e.sk, effects: e.effects})
	for st.retiredLRU.Len() > st.maxRetired {
		front := st.retiredLRU.Front()
		delete(st.retired, front.Value.(*retiredCount).sk)
		st.retiredLRU.Remove(front)
	}
}

// effects returns the side effects for sk, across expiry.
func (st *store) effects(sk scopeKey) int {
	n := 0
	if e, ok := st.entries[sk]; ok {
		n += e.effects
	}
	if el, ok := st.retired[sk]; ok {
		n += el.Value.(*retiredCount).effects
	}
	return n
}

// lookup returns the live entry for sk, forgetting it if it has expired
// (sweep alone would miss it if the clock went backwards).
func (st *store) lookup(sk scopeKey, now time.Time, retention time.Duration) *entry {
	e, ok := st.entries[sk]
	if !ok {
		return nil
	}
	if e.expired(now, retention) {
		delete(st.entries, sk)
		st.retire(e)
		return nil
	}
	return e
}
