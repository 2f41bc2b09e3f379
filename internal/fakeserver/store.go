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
	// failStatus is the status of a failed result: 402 (decline) or 409
	// (reject-409).
	failStatus int
	counts     KeyStats

	// inFlight is true while the request that committed the entry has not
	// answered yet (the delay-response fault): repeats get 409.
	inFlight bool
	// foreign marks an entry committed by Preempt: repeats get 409 while
	// it is processing, as while a request is in flight.
	foreign bool
	// doneAt ends slow processing; visibleAt ends query lag; committedBy
	// ends the run of a still-running request, which has not committed
	// before it.
	doneAt, visibleAt, committedBy time.Time
	// runningShown makes the result endpoint answer processing while the
	// request runs, rather than not found (still-running-processing).
	runningShown bool
	// retryAfter and httpDate shape the Retry-After of the 409 while
	// processing.
	retryAfter time.Duration
	httpDate   bool
	// stored, under Behavior.StoreErrors, is the server error stored as
	// the key's answer, replayed instead of the result.
	stored *answer
	// noResult hides the entry from the result endpoint: a stored error
	// that performed nothing.
	noResult bool
	// order marks an order API's entry (Behavior.KeyMember): answered in
	// Binance's shapes, its number orderID.
	order   bool
	orderID int
}

// KeyStats are the counters of one (scope, key), across expiries.
type KeyStats struct {
	// Effects counts the side effects of requests received: 2 means the
	// key executed again after it expired.
	Effects int `json:"effects"`
	// ForeignEffects counts the side effects of requests made by
	// [Server.Preempt] or the preempt fault: someone else's order.
	ForeignEffects int `json:"foreign_effects"`
	// SubmitsAfterFinal counts the submits received while the key's answer
	// was final: stored, and neither in flight nor processing. A client
	// that keeps resending a key whose answer cannot change makes it grow.
	// A submit a fault turns away unprocessed (throttle, unavailable,
	// error-before-commit) does not: it told the client to send again.
	SubmitsAfterFinal int `json:"submits_after_final"`
	// Conflicts counts the answers that the key was used with another
	// request (422, or the behaviour's status).
	Conflicts int `json:"conflicts"`
	// Refusals counts an order API's 400 -2010 "Duplicate order sent."
	// to the key sent again while its order exists (Behavior.KeyMember).
	Refusals int `json:"refusals"`
}

func (k *KeyStats) add(o KeyStats) {
	k.Effects += o.Effects
	k.ForeignEffects += o.ForeignEffects
	k.SubmitsAfterFinal += o.SubmitsAfterFinal
	k.Conflicts += o.Conflicts
	k.Refusals += o.Refusals
}

// result is the body of submit and query answers.
type result struct {
	State      string `json:"state"`
	ResourceID string `json:"resourceId,omitempty"`
	Key        string `json:"key"`
	Reason     string `json:"reason,omitempty"`
}

func (e *entry) processing(now time.Time) bool { return now.Before(e.doneAt) }

// running reports whether the entry's request still runs at now, not yet
// committed (the still-running fault).
func (e *entry) running(now time.Time) bool { return now.Before(e.committedBy) }

// hidden reports whether the result endpoint answers "not found" for the
// entry at now: nothing of it committed yet, or not yet visible.
func (e *entry) hidden(now time.Time) bool {
	return e.noResult || e.running(now) && !e.runningShown || now.Before(e.visibleAt)
}

// final reports whether the key's answer can no longer change at now.
func (e *entry) final(now time.Time) bool {
	return !e.inFlight && !e.processing(now) && !e.running(now)
}

// expired reports whether the key's window has ended at now.
func (e *entry) expired(now time.Time, retention time.Duration) bool {
	return !now.Before(e.committedAt.Add(retention))
}

// result returns the entry's state as seen at now.
func (e *entry) result(now time.Time) result {
	if e.running(now) {
		// Nothing is committed yet: no resource, no outcome.
		return result{State: stateProcessing, Key: e.sk.key}
	}
	state := e.state
	if e.processing(now) {
		state = stateProcessing
	}
	return result{State: state, ResourceID: e.resourceID, Key: e.sk.key, Reason: e.reason}
}

// response returns the stored answer at now: a stored error, else 201
// succeeded, 402 or 409 failed, 202 processing (see encodeJSON for the 500
// it cannot reach).
func (e *entry) response(now time.Time) answer {
	if e.stored != nil {
		return *e.stored
	}
	if e.order {
		return e.orderAnswer(now)
	}
	res := e.result(now)
	status := http.StatusCreated
	switch res.State {
	case stateProcessing:
		status = http.StatusAccepted
	case stateFailed:
		status = e.failStatus
	}
	var a answer
	a.status, a.body = encodeJSON(status, res)
	return a
}

// answerOnCommit returns the answer of the request that committed e at
// now: the stored answer as it stands once the request has run, not the
// processing it reports while it runs.
func (e *entry) answerOnCommit(now time.Time) answer {
	return e.response(later(now, e.committedBy))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// store holds the keys, in commit order, and the counters of expired keys.
// It is guarded by Server.mu.
type store struct {
	entries map[scopeKey]*entry
	order   []*entry // commit order; entries may have been replaced
	// retired holds the counters of expired keys, most recently expired
	// last, so KeyStats keeps counting across expiry. At most maxRetired
	// keys are remembered.
	retired    map[scopeKey]*list.Element
	retiredLRU *list.List // of *retiredCount
	maxRetired int
}

type retiredCount struct {
	sk     scopeKey
	counts KeyStats
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
	if e.counts == (KeyStats{}) {
		return
	}
	if el, ok := st.retired[e.sk]; ok {
		el.Value.(*retiredCount).counts.add(e.counts)
		st.retiredLRU.MoveToBack(el)
		return
	}
	st.retired[e.sk] = st.retiredLRU.PushBack(&retiredCount{sk: e.sk, counts: e.counts})
	for st.retiredLRU.Len() > st.maxRetired {
		front := st.retiredLRU.Front()
		delete(st.retired, front.Value.(*retiredCount).sk)
		st.retiredLRU.Remove(front)
	}
}

// keyStats returns the counters of sk, across expiry.
func (st *store) keyStats(sk scopeKey) KeyStats {
	var k KeyStats
	if e, ok := st.entries[sk]; ok {
		k.add(e.counts)
	}
	if el, ok := st.retired[sk]; ok {
		k.add(el.Value.(*retiredCount).counts)
	}
	return k
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
