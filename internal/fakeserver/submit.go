package fakeserver

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"time"
)

// outcome is what a submit gets from the key store, before faults.
type outcome int

const (
	outExecute    outcome = iota // new key: commit and perform the side effect
	outReplay                    // same key, same request: replay
	outConflict                  // same key, different request: 422
	outInFlight                  // same key, first request not answered yet: 409
	outProcessing                // same key, slow processing not done: 409
	outFull                      // new key, store full: 503
	outQuery                     // a result query (faults only)
)

const (
	msgConflict   = "idempotency key reused with a different request"
	msgInProgress = "request with this key is in progress"
	msgRejected   = "order conflicts with the current state of the resource"
	msgInternal   = "internal server error"
)

// requestDigest identifies a request for key reuse checks: method, request
// URI (path and query) and body.
func requestDigest(method, uri string, bodySum [32]byte) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", method, uri)
	h.Write(bodySum[:])
	var d [32]byte
	h.Sum(d[:0])
	return d
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	req := s.newRequest(r)
	values := r.Header.Values(s.cfg.KeyHeader)
	if len(values) == 0 || (len(values) == 1 && values[0] == "") {
		s.rejectRequest(w, req, classSubmit, http.StatusBadRequest, "missing "+s.cfg.KeyHeader+" header", "")
		return
	}
	if len(values) > 1 {
		s.rejectRequest(w, req, classSubmit, http.StatusBadRequest, "more than one "+s.cfg.KeyHeader+" header", "")
		return
	}
	key, err := parseKey(values[0])
	if err != nil {
		s.rejectRequest(w, req, classSubmit, http.StatusBadRequest, "invalid "+s.cfg.KeyHeader+" header: "+err.Error(), "")
		return
	}
	req.Key = key
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		status, msg := bodyError(err)
		s.rejectRequest(w, req, classSubmit, status, msg, "")
		return
	}
	req.BodySHA256 = sha256.Sum256(body)
	digest := requestDigest(r.Method, r.URL.RequestURI(), req.BodySHA256)

	s.mu.Lock()
	gen := s.gen
	seq := s.logLocked(req, classSubmit)
	now := s.cfg.Now()
	s.st.sweep(now, s.cfg.Retention)
	sk := scopeKey{req.Scope, key}
	e := s.st.lookup(sk, now, s.cfg.Retention)
	if e != nil && e.final(now) {
		e.counts.SubmitsAfterFinal++
		s.stats.MaxSubmitsAfterFinal = max(s.stats.MaxSubmitsAfterFinal, s.st.keyStats(sk).SubmitsAfterFinal)
	}
	out := s.classifyLocked(e, digest, now)
	drawn := s.drawLocked()
	f, _ := s.takeFaultLocked(key, false, out, drawn)
	if f.kind == Preempt {
		// Someone else's request got there first; this one meets it.
		e = s.preemptLocked(sk, now, f.delay)
		out = s.classifyLocked(e, digest, now)
	}

	var a answer
	executed := false
	switch {
	case f.kind.storedUnder(s.cfg.Behavior):
		e = s.executeLocked(sk, digest, now, f)
		executed = true
		a = e.response(now)
	case f.kind.replacesProcessing():
		a = faultAnswer(f)
	case out == outExecute:
		e = s.executeLocked(sk, digest, now, f)
		executed = true
		a = e.response(now)
	case out == outReplay:
		s.stats.Replays++
		a = e.response(now)
		a.replayed = true
	case out == outConflict:
		s.stats.Conflicts++
		e.counts.Conflicts++
		a = errorAnswer(s.cfg.Behavior.conflictStatus(), msgConflict)
	case out == outInFlight:
		a = errorAnswer(http.StatusConflict, msgInProgress)
		a.retryAfter = time.Second
	case out == outProcessing:
		a = errorAnswer(http.StatusConflict, msgInProgress)
		a.retryAfter, a.httpDate = e.retryAfter, e.httpDate
	case out == outFull:
		a = errorAnswer(http.StatusServiceUnavailable, "key store full")
	}
	if executed {
		s.eventLocked(e, body, now)
	}
	s.mu.Unlock()

	deliver(w, r, a, s.responseFault(f), s.cfg.Now, func(status int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if executed {
			e.inFlight = false
		}
		s.finishLocked(gen, seq, status, f.kind)
	})
}

// responseFault returns f if it shapes the response, else no fault.
func (s *Server) responseFault(f applied) applied {
	if f.kind.replacesProcessing() || f.kind.shapesCommit() || f.kind.storedUnder(s.cfg.Behavior) {
		return applied{}
	}
	return f
}

// classifyLocked decides the outcome of a submit of digest against the live
// entry e (nil if none).
func (s *Server) classifyLocked(e *entry, digest [32]byte, now time.Time) outcome {
	switch {
	case e == nil && len(s.st.entries) >= s.cfg.MaxKeys:
		return outFull
	case e == nil:
		return outExecute
	case e.inFlight, e.foreign && e.processing(now):
		// Someone else's request is still executing: like a request in
		// flight, whatever the body.
		return outInFlight
	case e.digest != digest && !s.cfg.Behavior.NoBodyCompare:
		return outConflict
	case e.processing(now):
		return outProcessing
	}
	return outReplay
}

// executeLocked commits a new key, shaped by the commit fault f, and
// performs the side effect unless the fault declines or refuses. A fault
// stored under the behaviour (see FaultKind.storedUnder) becomes the key's
// answer.
func (s *Server) executeLocked(sk scopeKey, digest [32]byte, now time.Time, f applied) *entry {
	e := &entry{sk: sk, digest: digest, committedAt: now, state: stateSucceeded}
	switch f.kind {
	case Decline:
		e.state, e.reason, e.failStatus = stateFailed, "card declined", http.StatusPaymentRequired
	case Reject409:
		e.state, e.reason, e.failStatus = stateFailed, msgRejected, http.StatusConflict
	case SlowProcessing:
		e.doneAt = now.Add(f.delay)
		e.retryAfter, e.httpDate = orOneSecond(f.retryAfter), f.httpDate
	case QueryLag:
		e.visibleAt = now.Add(f.delay)
	case DelayResponse:
		e.inFlight = true
	}
	if f.kind.storedUnder(s.cfg.Behavior) {
		stored := faultAnswer(f)
		e.stored = &stored
		if f.kind != ErrorAfterCommit {
			// The handler failed before it did anything: there is no
			// result to report.
			e.noResult, e.state = true, stateFailed
		}
	}
	if e.state == stateSucceeded {
		s.nextID++
		e.resourceID = fmt.Sprintf("ord_%06d", s.nextID)
		e.counts.Effects = 1
		s.stats.SideEffects++
	}
	s.st.add(e)
	if n := s.st.keyStats(sk).Effects; n > s.stats.MaxEffectsPerKey {
		s.stats.MaxEffectsPerKey = n
	}
	return e
}
