package idem_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// The simulated server of the model-based test (model_test.go): one
// Idempotency-Key server whose behaviour is drawn per history from what
// real servers and middlewares do, and whose every answer may be spoiled
// by a fault drawn per request. It runs in process, on the history's
// virtual clock: no sockets, no sleeping.

// bodyCheck is what the server does when a key comes back with another body.
type bodyCheck int

const (
	bodyCheck422  bodyCheck = iota // the IETF draft: 422
	bodyCheck417                   // the same refusal with another status
	bodyCheckNone                  // no comparison: the stored answer is replayed to any body
)

func (b bodyCheck) String() string {
	return [...]string{"422", "417", "none"}[b]
}

// modelProfile is the server one history talks to.
type modelProfile struct {
	bodyCheck   bodyCheck
	storeErrors bool          // handler errors are stored and replayed for the key's life
	window      time.Duration // how long the server keeps a key, from its first execution
	clientKnows bool          // the client is configured with the window (WithKeyRetention)
	resultEP    bool          // a result endpoint by key exists, and the client knows it
	idShape     bool          // a created resource is answered {"id":…}, not {"state":…}
	skew        time.Duration // server clock minus true time: shows in Retry-After dates
	lag         time.Duration // the result endpoint may answer 404 this long after a commit
	knowsBy     knowWindow    // how the client is told the window, if it is
	conflict417 bool          // the client is told that 417 means "key used with another body"
	quotedKey   bool          // the key travels as an sf-string, "…", as the IETF draft has it
	faultRate   float64       // share of requests hit by a fault
}

func (p *modelProfile) String() string {
	return fmt.Sprintf("bodyCheck=%v storeErrors=%v window=%v clientKnows=%v (%v) resultEndpoint=%v idShape=%v skew=%v lag=%v faultRate=%v conflict417=%v quotedKey=%v",
		p.bodyCheck, p.storeErrors, p.window, p.clientKnows, p.knowsBy, p.resultEP, p.idShape, p.skew, p.lag, p.faultRate, p.conflict417, p.quotedKey)
}

// knowWindow is how the client is configured with the server's window.
type knowWindow int

const (
	knowByDefault knowWindow = iota // WithKeyRetention (a preset where one fits)
	knowByHost                      // WithHostKeyRetention, with a longer default for other hosts
)

func (k knowWindow) String() string {
	return [...]string{"WithKeyRetention", "WithHostKeyRetention"}[k]
}

// handlerKind is what the application behind the middleware does with a
// request it executes.
type handlerKind int

const (
	hSucceed handlerKind = iota // creates a resource: the side effect
	hDecline                    // refuses it (declined card, validation): no effect
	hError                      // fails with a 5xx, maybe after doing the work
)

// handlerPlan is fixed per request body: running it again does the same.
type handlerPlan struct {
	kind   handlerKind
	status int  // hDecline, hError: the status answered
	effect bool // hError: the work was done before the failure
}

func (p handlerPlan) String() string {
	switch p.kind {
	case hSucceed:
		return "succeeds"
	case hDecline:
		return fmt.Sprintf("declines %d", p.status)
	default:
		return fmt.Sprintf("errors %d (effect %v)", p.status, p.effect)
	}
}

// fault spoils one request.
type fault int

const (
	fNone       fault = iota
	fNotWritten       // the dial is refused: the request never leaves
	f429              // throttled at the front door, with Retry-After
	f503              // unavailable at the front door, with Retry-After
	f500Before        // 500 before anything is committed
	f401              // a gateway refuses the credentials
	fLost             // executed, then the connection drops: no answer
	f500After         // executed, then a 500 instead of the answer
	f503After         // executed, then a gateway's 503 (with Retry-After) instead of the answer
	fGarbage          // executed, then a garbage 2xx body
	fTimeout          // processing outlives the attempt timeout; the key stays in flight
	fSlow             // executed asynchronously: 202 now, the result later
	numFaults
)

func (f fault) String() string {
	return [...]string{"", "not-written", "429", "503", "500-before-commit", "401-gateway", "lost-response",
		"500-after-commit", "503-after-commit", "garbage-2xx", "timeout", "slow"}[f]
}

// Faults a submit may meet. A history with a foreign request on an
// operation's key limits that operation to faults that leave no doubt
// that this attempt did not execute: after any other, a correct client
// cannot tell the foreign request's stored answer from its own (see
// fairFaults in model_test.go).
var (
	allSubmitFaults  = []fault{fNotWritten, f429, f503, f500Before, f401, fLost, f500After, f503After, fGarbage, fTimeout, fSlow}
	fairSubmitFaults = []fault{fNotWritten, f429, f401, fSlow}
	queryFaults      = []fault{fNotWritten, f503, f500Before, fLost, fGarbage}
)

// srvEntry is what the server holds for a key.
type srvEntry struct {
	owner   *modelOp // whose key it is: ours or the foreign request on it
	foreign bool
	body    string
	plan    handlerPlan
	created time.Time // first execution: the key window runs from it
	doneAt  time.Time // in flight until then
	stored  bool      // the answer is replayed for the key's life; else the key is released when done
	status  int
	resp    []byte
	resID   string // what the execution created; "" if nothing
	lag     time.Duration
}

// srvAnswer is what the server (and the network) made of one request.
type srvAnswer struct {
	status  int
	body    []byte
	header  http.Header
	lost    bool // transport error after the request was written
	timeout bool // lost after the attempt timeout
	// final: the key's stored answer (or the refusal of another body)
	// reached the client intact: resending cannot change it.
	final bool
	// notExec: an answer saying this attempt did not execute (the client
	// may restart its key window after it).
	notExec bool
	// executed: this request ran the handler (entry is the new one).
	executed *srvEntry
	note     string
}

type modelServer struct {
	prof    *modelProfile
	entries map[string]*srvEntry
	nextID  int
}

// lookup returns the key's entry at t, forgetting it once its window has
// passed (or at once, for an answer that is not stored).
func (s *modelServer) lookup(key string, t time.Time) *srvEntry {
	e := s.entries[key]
	if e == nil {
		return nil
	}
	if !t.Before(e.doneAt) && (!e.stored || !t.Before(e.created.Add(s.prof.window))) {
		delete(s.entries, key)
		return nil
	}
	return e
}

// execute runs the handler for a request that found the key free.
func (s *modelServer) execute(key string, owner *modelOp, foreign bool, body []byte, plan handlerPlan, t time.Time, inflight time.Duration, async bool) *srvEntry {
	s.nextID++
	e := &srvEntry{owner: owner, foreign: foreign, body: string(body), plan: plan, created: t, doneAt: t.Add(inflight)}
	if s.nextID%2 == 0 {
		// Not every commit reaches the endpoint's replica late.
		e.lag = s.prof.lag
	}
	switch plan.kind {
	case hSucceed:
		e.resID = fmt.Sprintf("ord_%d", s.nextID)
		e.status, e.stored = http.StatusCreated, true
		if s.prof.idShape {
			e.resp = fmt.Appendf(nil, `{"id":%q,"object":"order","status":"created"}`, e.resID)
		} else {
			e.resp = fmt.Appendf(nil, `{"state":"succeeded","resourceId":%q}`, e.resID)
		}
	case hDecline:
		e.status, e.stored = plan.status, s.prof.storeErrors || async
		switch plan.status {
		case http.StatusConflict:
			e.resp = []byte(`{"error":"an order with this reference already exists"}`)
		default:
			e.resp = []byte(`{"error":{"message":"card declined"}}`)
		}
	case hError:
		e.status, e.stored = plan.status, s.prof.storeErrors || async
		e.resp = []byte(`{"error":"internal error"}`)
		if plan.effect {
			e.resID = fmt.Sprintf("ord_%d", s.nextID)
		}
	}
	s.entries[key] = e
	return e
}

func jsonAnswer(status int, body string) srvAnswer {
	return srvAnswer{status: status, body: []byte(body), header: http.Header{"Content-Type": {"application/json"}}}
}

// retryAfter sets a Retry-After of a few seconds to two minutes, in
// delta-seconds or as an HTTP-date on the server's (skewed) clock.
func (s *modelServer) retryAfter(a *srvAnswer, rng *rand.Rand, t time.Time) {
	d := time.Duration(1+rng.IntN(120)) * time.Second
	if rng.IntN(4) == 0 {
		a.header.Set("Retry-After", t.Add(s.prof.skew).Add(d).UTC().Format(http.TimeFormat))
		return
	}
	a.header.Set("Retry-After", strconv.Itoa(int(d/time.Second)))
}

// submit answers one submit of op (keyHeader is what the request carried)
// at true time t, with fault f.
func (s *modelServer) submit(op *modelOp, keyHeader string, body []byte, f fault, rng *rand.Rand, t time.Time) srvAnswer {
	a := s.submitRaw(op, keyHeader, body, f, rng, t)
	// The latest a client may restart its key window: after any refusal
	// that is not a replay. (Only 409, 429, 400 and 422 say so by the
	// outcome table; counting every 4xx here keeps the window check from
	// blaming a client for a reading more careful than the model's.)
	a.notExec = !a.lost && a.status >= 400 && a.status < 500 && a.status != http.StatusRequestTimeout &&
		a.header.Get("Idempotent-Replayed") == ""
	return a
}

func (s *modelServer) submitRaw(op *modelOp, keyHeader string, body []byte, f fault, rng *rand.Rand, t time.Time) srvAnswer {
	switch f {
	case f429, f503:
		status := http.StatusTooManyRequests
		if f == f503 {
			status = http.StatusServiceUnavailable
		}
		a := jsonAnswer(status, `{"error":"slow down"}`)
		s.retryAfter(&a, rng, t)
		return a
	case f500Before:
		return jsonAnswer(http.StatusInternalServerError, `{"error":"internal error"}`)
	case f401:
		return jsonAnswer(http.StatusUnauthorized, `{"error":"invalid credentials"}`)
	}
	if keyHeader == "" {
		return jsonAnswer(http.StatusBadRequest, `{"error":"Idempotency-Key header missing"}`)
	}
	if fp := op.foreign; fp != nil && !fp.applied {
		// Another request with the same key and another body got there
		// first: done already, or still in flight.
		fp.applied = true
		fe := s.execute(keyHeader, op, true, fp.body, fp.handler, t, fp.inflight, false)
		fp.resID = fe.resID
	}
	var a srvAnswer
	e := s.lookup(keyHeader, t)
	switch {
	case e == nil:
		var inflight time.Duration
		async := f == fSlow
		if async || f == fTimeout {
			// Bounded well inside the key window: a key is not forgotten
			// while in flight.
			inflight = time.Duration(1+rng.IntN(int(min(5*time.Minute, s.prof.window/4)/time.Second))) * time.Second
		}
		if f == fTimeout {
			inflight += 10 * time.Second
		}
		e = s.execute(keyHeader, op, false, body, op.handler, t, inflight, async)
		a = jsonAnswer(e.status, string(e.resp))
		a.final = e.stored && inflight == 0
		if async {
			a = jsonAnswer(http.StatusAccepted, `{"state":"processing"}`)
		}
		a.executed = e
		a.note = "executed: " + op.handler.String()
		if e.resID != "" {
			a.note += ", created " + e.resID
		}
		if inflight > 0 {
			a.note += fmt.Sprintf(", in flight for %v", inflight)
		}
	case t.Before(e.doneAt):
		a = jsonAnswer(http.StatusConflict, `{"error":"a request with this Idempotency-Key is being processed"}`)
		a.note = "key in flight"
	case e.body != string(body) && s.prof.bodyCheck == bodyCheck422:
		a = jsonAnswer(http.StatusUnprocessableEntity, `{"error":"Idempotency-Key already used with a different request body"}`)
		a.final, a.note = true, "key used with another body"
	case e.body != string(body) && s.prof.bodyCheck == bodyCheck417:
		a = jsonAnswer(http.StatusExpectationFailed, `{"error":"Idempotency-Key already used with a different request body"}`)
		a.final, a.note = true, "key used with another body"
	default:
		a = jsonAnswer(e.status, string(e.resp))
		a.header.Set("Idempotent-Replayed", "true")
		a.final = true
		a.note = "replayed"
		if e.foreign {
			a.note = "replayed the foreign request's answer"
		}
	}
	switch f {
	case fLost:
		a.lost, a.final = true, false
	case fTimeout:
		a.lost, a.timeout, a.final = true, true, false
	case f500After:
		a.status, a.body, a.final = http.StatusInternalServerError, []byte(`{"error":"internal error"}`), false
		a.header.Del("Idempotent-Replayed")
	case f503After:
		a.status, a.body, a.final = http.StatusServiceUnavailable, []byte(`{"error":"upstream timed out"}`), false
		a.header.Del("Idempotent-Replayed")
		s.retryAfter(&a, rng, t)
	case fGarbage:
		a.status, a.body, a.final = http.StatusOK, []byte("<html>\x00502 gateway hiccup{\"state\":"), false
		a.header.Del("Idempotent-Replayed")
	}
	return a
}

// query answers the result endpoint for key at true time t.
func (s *modelServer) query(key string, f fault, rng *rand.Rand, t time.Time) srvAnswer {
	switch f {
	case f503:
		a := jsonAnswer(http.StatusServiceUnavailable, `{"error":"slow down"}`)
		s.retryAfter(&a, rng, t)
		return a
	case f500Before:
		return jsonAnswer(http.StatusInternalServerError, `{"error":"internal error"}`)
	}
	var a srvAnswer
	e := s.lookup(key, t)
	switch {
	case e == nil:
		a = jsonAnswer(http.StatusNotFound, `{"error":"no operation with this key"}`)
	case t.Before(e.doneAt):
		a = jsonAnswer(http.StatusOK, `{"state":"processing"}`)
	case t.Before(e.doneAt.Add(e.lag)):
		a = jsonAnswer(http.StatusNotFound, `{"error":"no operation with this key"}`)
		a.note = "lagging"
	case e.resID != "":
		a = jsonAnswer(http.StatusOK, fmt.Sprintf(`{"state":"succeeded","resourceId":%q}`, e.resID))
	case e.plan.kind == hDecline:
		a = jsonAnswer(http.StatusOK, `{"state":"failed","reason":"declined"}`)
	default:
		// A handler error that created nothing: the resource table the
		// endpoint reads has no row.
		a = jsonAnswer(http.StatusNotFound, `{"error":"no operation with this key"}`)
	}
	if e != nil && e.foreign {
		a.note = "the foreign request's result"
	}
	switch f {
	case fLost:
		a.lost = true
	case fGarbage:
		a.status, a.body = http.StatusOK, []byte("<html>\x00502 gateway hiccup")
	}
	return a
}
