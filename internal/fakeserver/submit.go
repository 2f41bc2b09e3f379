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
	outRefused                   // order API: the id's order exists, 400 -2010
	outRunning                   // same key, still-running request not committed: Stripe's 409
)

const (
	msgConflict   = "idempotency key reused with a different request"
	msgInProgress = "request with this key is in progress"
	msgRejected   = "order conflicts with the current state of the resource"
	msgInternal   = "internal server error"
)

// keyInUseAnswer is Stripe's answer to a request whose key another
// request still running holds
// (https://docs.stripe.com/error-codes#idempotency-key-in-use): its
// message names the key, as Stripe's does ("…still going through):
// <key>. Please try again later."), so that a client's reading of a body
// naming its key meets it here too.
func keyInUseAnswer(key string) answer {
	var v struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	v.Error.Code, v.Error.Type = "idempotency_key_in_use", "idempotency_error"
	v.Error.Message = "There is currently another in-progress request using this Idempotent Key (that probably means you " +
		"submitted twice, and the other request is still going through): " + key + ". Please try again later."
	var a answer
	a.status, a.body = encodeJSON(http.StatusConflict, v)
	return a
}

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
	body, ok := s.readSubmit(w, r, &req)
	if !ok {
		return
	}
	key := req.Key
	req.BodySHA256 = sha256.Sum256(body)
	digest := requestDigest(r.Method, r.URL.RequestURI(), req.BodySHA256)

	s.mu.Lock()
	gen := s.gen
	seq := s.logLocked(req, classSubmit)
	now := s.cfg.Now()
	s.st.sweep(now, s.cfg.Retention)
	s.releaseLocked(now)
	sk := scopeKey{req.Scope, key}
	e := s.st.lookup(sk, now, s.cfg.Retention)
	out := s.classifyLocked(e, digest, now)
	drawn := s.drawLocked()
	f, _ := s.takeFaultLocked(key, false, out, drawn)
	// An order API's order never placed (declined, rejected) left its id
	// free, and an endpoint that ignores the key stores no answer: the
	// next submit after an order never placed is a new order, not a
	// resend of a final answer (after one placed, it is a resend of
	// what executed, counted). A submit a fault turns away unprocessed
	// (429, 503, a 500 before the commit) is not counted either: the
	// server told the client to send again without looking at the key,
	// and the client that does so is right, however final the key's
	// answer (the mixed matrix row stacks a 409, two 503s and a dropped
	// replay on one key).
	if e != nil && e.final(now) && !((e.order || s.cfg.Behavior.KeyIgnored) && e.state == stateFailed) &&
		!f.kind.replacesProcessing() {
		e.counts.SubmitsAfterFinal++
		s.stats.MaxSubmitsAfterFinal = max(s.stats.MaxSubmitsAfterFinal, s.st.keyStats(sk).SubmitsAfterFinal)
	}
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
		a = e.answerOnCommit(now)
	case f.kind.replacesProcessing():
		a = faultAnswer(f)
	case out == outExecute:
		prev := e
		e = s.executeLocked(sk, digest, now, f)
		if prev != nil {
			// An order API's order never placed, or filled under
			// OpenOnly, left its id free, or the endpoint ignores the
			// key: the key's counters go on across it, a second order
			// included.
			e.counts.add(prev.counts)
			s.stats.MaxEffectsPerKey = max(s.stats.MaxEffectsPerKey, s.st.keyStats(sk).Effects)
		}
		executed = true
		a = e.answerOnCommit(now)
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
	case out == outRunning:
		a = keyInUseAnswer(key)
	case out == outRefused:
		s.stats.Refusals++
		e.counts.Refusals++
		a = orderError(http.StatusBadRequest, codeRejected, msgDuplicateOrder)
	case out == outFull:
		a = errorAnswer(http.StatusServiceUnavailable, "key store full")
	}
	if executed {
		s.eventLocked(e, body, now)
		a.keyIgnored = s.cfg.Behavior.KeyIgnored
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

// readSubmit reads a submit's key and body into req, or answers the
// request itself and returns false: the key from the key header, or under
// Behavior.KeyMember from the body.
func (s *Server) readSubmit(w http.ResponseWriter, r *http.Request, req *Request) ([]byte, bool) {
	member := s.cfg.Behavior.KeyMember
	if member == "" {
		values := r.Header.Values(s.cfg.KeyHeader)
		if len(values) == 0 || (len(values) == 1 && values[0] == "") {
			s.rejectRequest(w, *req, classSubmit, http.StatusBadRequest, "missing "+s.cfg.KeyHeader+" header", "")
			return nil, false
		}
		if len(values) > 1 {
			s.rejectRequest(w, *req, classSubmit, http.StatusBadRequest, "more than one "+s.cfg.KeyHeader+" header", "")
			return nil, false
		}
		key, err := parseKey(values[0])
		if err != nil {
			s.rejectRequest(w, *req, classSubmit, http.StatusBadRequest, "invalid "+s.cfg.KeyHeader+" header: "+err.Error(), "")
			return nil, false
		}
		req.Key = key
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		status, msg := bodyError(err)
		s.rejectRequest(w, *req, classSubmit, status, msg, "")
		return nil, false
	}
	if member != "" {
		key := memberKey(body, member)
		req.RawKey = key
		if key == "" || len(key) > MaxKeyLen {
			s.rejectOrder(w, *req, http.StatusBadRequest, codeMandatory, fmt.Sprintf("Mandatory parameter '%s' was not sent, was empty/null, or malformed.", member))
			return nil, false
		}
		req.Key = key
	}
	return body, true
}

// responseFault returns f if it shapes the response, else no fault.
func (s *Server) responseFault(f applied) applied {
	if f.kind.shapesAnswer() {
		return f
	}
	if f.kind.replacesProcessing() || f.kind.shapesCommit() || f.kind.storedUnder(s.cfg.Behavior) {
		return applied{}
	}
	return f
}

// classifyLocked decides the outcome of a submit of digest against the live
// entry e (nil if none).
func (s *Server) classifyLocked(e *entry, digest [32]byte, now time.Time) outcome {
	if s.cfg.Behavior.KeyIgnored {
		// The key is not looked at: a resend is a new order.
		if e == nil && len(s.st.entries) >= s.cfg.MaxKeys {
			return outFull
		}
		return outExecute
	}
	if s.cfg.Behavior.KeyMember != "" {
		// An order API replays nothing: a placed order's id is taken,
		// in flight or resting or filled alike, and one never placed
		// leaves it free.
		switch {
		case e != nil && e.running(now),
			e != nil && e.state != stateFailed && (!s.cfg.Behavior.OpenOnly || e.inFlight || e.processing(now)):
			return outRefused
		case e == nil && len(s.st.entries) >= s.cfg.MaxKeys:
			return outFull
		}
		return outExecute
	}
	switch {
	case e == nil && len(s.st.entries) >= s.cfg.MaxKeys:
		return outFull
	case e == nil:
		return outExecute
	case e.running(now):
		// Stripe answers any request with the key so while the first
		// runs, whatever its body.
		return outRunning
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
	e := &entry{sk: sk, digest: digest, committedAt: now, state: stateSucceeded, order: s.cfg.Behavior.KeyMember != ""}
	switch f.kind {
	case Decline, StillRunningDecline:
		e.state, e.reason, e.failStatus = stateFailed, "card declined", http.StatusPaymentRequired
	case Reject409:
		e.state, e.reason, e.failStatus = stateFailed, msgRejected, http.StatusConflict
	case SlowProcessing:
		e.doneAt = now.Add(f.delay)
		e.retryAfter, e.httpDate = orOneSecond(f.retryAfter), f.httpDate
	case QueryLag, LostAnswerLag:
		e.visibleAt = now.Add(f.delay)
	case DelayResponse:
		e.inFlight = true
	}
	if f.kind.runs() {
		e.committedBy = now.Add(f.delay)
		e.runningShown = f.kind == StillRunningProcessing
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
		e.orderID = s.nextID
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
