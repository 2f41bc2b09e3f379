package fakeserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxPendingFaults caps the scripted faults waiting to apply.
const maxPendingFaults = 10_000

// Stats are the server's counters since [New] or the last [Server.Reset].
// Control requests (paths starting with "/_") are not counted.
type Stats struct {
	Requests    int `json:"requests"`     // every request but control ones
	Submits     int `json:"submits"`      // POST, PUT, PATCH, DELETE to resource paths
	Queries     int `json:"queries"`      // GET /operations/{key}
	SideEffects int `json:"side_effects"` // resources created
	Keys        int `json:"keys"`         // keys stored now (not expired)
	// MaxEffectsPerKey is the largest number of side effects for one
	// (scope, key), across expiries: 1 means "exactly one order per
	// intent" held so far.
	MaxEffectsPerKey int `json:"max_effects_per_key"`
	Replays          int `json:"replays"`   // stored responses replayed
	Conflicts        int `json:"conflicts"` // 422 (or the behaviour's status): key reused with a different request
	// Refusals counts the 400 -2010 "Duplicate order sent." of an order
	// API (Behavior.KeyMember): an id sent again while its order exists.
	Refusals int `json:"refusals"`
	// ForeignEffects counts the side effects of someone else's requests
	// (Server.Preempt and the preempt fault), not in SideEffects.
	ForeignEffects int `json:"foreign_effects"`
	// MaxSubmitsAfterFinal is the largest KeyStats.SubmitsAfterFinal of any
	// key: how often one key was resent at most once its answer could no
	// longer change.
	MaxSubmitsAfterFinal int `json:"max_submits_after_final"`
}

// Server is the fake idempotent server, an [http.Handler]. Create it with
// [New]; it is safe for concurrent use. Its state lives in memory, behind
// one mutex: every decision about a key, including the side effect, is
// atomic.
type Server struct {
	cfg Config

	mu      sync.Mutex
	gen     uint64 // incremented by Reset, so late requests leave the new state alone
	st      store
	log     requestLog
	stats   Stats
	nextID  int
	faults  []Fault // scripted, Count > 0, in injection order
	profile Profile
	rng     *rand.Rand
	hooks   *webhooks // nil without Config.Webhook
	// held holds the webhook events not yet so by the server's clock:
	// of requests still running, and slow ones' final states.
	held []heldEvent
}

// New returns a server configured by cfg, its zero fields set to their
// defaults. If a field of cfg is invalid (see [Config]) it returns a nil
// server and an error that says which field and what to change.
//
// The errors of New, [Server.Inject] and [Server.SetProfile] read
// "fakeserver: Method: cause" and wrap the bare cause, which
// [errors.Unwrap] returns.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fakeserver: New: %w", err)
	}
	s := &Server{cfg: cfg.withDefaults()}
	if cfg.Webhook != nil {
		s.hooks = newWebhooks(*cfg.Webhook, s.cfg.Now, uint64(cfg.Seed))
	}
	s.resetLocked()
	return s, nil
}

// Close stops webhook deliveries, those in flight included, and waits for
// them to end. Without Config.Webhook it does nothing. Call it once the
// server serves no more requests.
func (s *Server) Close() {
	if s.hooks != nil {
		s.hooks.close()
	}
}

// FlushWebhooks waits until every webhook event made so far has been
// delivered or given up (see [Webhook]), or ctx ends; after Close it
// returns an error. Without Config.Webhook it returns at once. A held
// event (a still-running request's, a slow one's final state) is made
// once Config.Now has reached its time, not before.
func (s *Server) FlushWebhooks(ctx context.Context) error {
	if s.hooks == nil {
		return nil
	}
	s.release()
	if err := s.hooks.flush(ctx); err != nil {
		return fmt.Errorf("fakeserver: FlushWebhooks: %w", err)
	}
	return nil
}

// WebhookStats returns the webhook counters; zero without Config.Webhook.
func (s *Server) WebhookStats() WebhookStats {
	if s.hooks == nil {
		return WebhookStats{}
	}
	s.release()
	return s.hooks.statsNow()
}

// release queues the held webhook events whose time has come by now.
func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(s.cfg.Now())
}

func (s *Server) resetLocked() {
	s.gen++
	s.st = newStore(s.cfg.MaxKeys)
	s.log = requestLog{}
	s.stats = Stats{}
	s.nextID = 0
	s.faults = nil
	s.held = nil
	s.profile = s.cfg.Profile.clone()
	seed := uint64(s.cfg.Seed)
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if s.hooks != nil {
		s.hooks.nextID = 0
		s.hooks.reset(s.gen)
	}
}

// Reset returns the server to its state just after [New]: it forgets keys,
// counters, the request log and scripted faults, restores the profile of
// the [Config] and reseeds the RNG. Requests in flight finish without
// touching the new state.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

// Inject scripts a fault: it applies to the next f.Count matching requests
// (see [FaultKind] for which requests each fault matches), after the faults
// injected before it. It returns an error, and leaves the server as it was,
// if f is invalid (an unknown kind, a negative count or duration, a query
// fault of a kind that does not apply to queries) or if 10,000 faults are
// already pending.
func (s *Server) Inject(f Fault) error {
	if err := s.inject(f); err != nil {
		return fmt.Errorf("fakeserver: Inject: %w", err)
	}
	return nil
}

func (s *Server) inject(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	if f.Count == 0 {
		f.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) >= maxPendingFaults {
		return fmt.Errorf("%w: %d faults are waiting for matching requests (send requests to consume them, or Reset the server)", errTooManyFaults, len(s.faults))
	}
	s.faults = append(s.faults, f)
	return nil
}

var errTooManyFaults = errors.New("too many pending faults")

// SetProfile replaces the probabilistic faults; the RNG carries on. It
// returns an error, and keeps the current profile, if p is invalid (see
// [Profile]).
func (s *Server) SetProfile(p Profile) error {
	if err := p.validate(); err != nil {
		return fmt.Errorf("fakeserver: SetProfile: %w", err)
	}
	p = p.clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profile = p
	return nil
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.sweep(s.cfg.Now(), s.cfg.Retention)
	st := s.stats
	st.Keys = len(s.st.entries)
	return st
}

// Effects returns the side effects performed for (scope, key) by requests
// received, counting across expiries: 2 means the key executed again after
// it expired. It is KeyStats(scope, key).Effects.
func (s *Server) Effects(scope, key string) int {
	return s.KeyStats(scope, key).Effects
}

// KeyStats returns the counters of (scope, key), across expiries. Counts of
// expired keys are remembered for the Config.MaxKeys most recently expired
// keys.
func (s *Server) KeyStats(scope, key string) KeyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.keyStats(scopeKey{scope, key})
}

// Behavior returns the behaviour the server runs with, as configured.
func (s *Server) Behavior() Behavior { return s.cfg.Behavior }

// Preempt makes someone else use (scope, key) first, as the preempt fault
// does: a request with the key and a body of its own executes now (its
// side effect counts in KeyStats.ForeignEffects) and is processing for
// hold, by the server's clock. Meanwhile requests with the key get 409;
// after it, a different request gets the behaviour's conflict status, or
// under Behavior.NoBodyCompare a silent replay of the other request's 201.
// It returns an error if hold is negative or the key is in use.
func (s *Server) Preempt(scope, key string, hold time.Duration) error {
	if err := s.preempt(scope, key, hold); err != nil {
		return fmt.Errorf("fakeserver: Preempt: %w", err)
	}
	return nil
}

func (s *Server) preempt(scope, key string, hold time.Duration) error {
	if err := checkDuration("hold", hold); err != nil {
		return err
	}
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("key %q: want 1 to %d bytes", key, MaxKeyLen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	s.st.sweep(now, s.cfg.Retention)
	sk := scopeKey{scope, key}
	if s.st.lookup(sk, now, s.cfg.Retention) != nil {
		return fmt.Errorf("key %q of scope %q is in use (preempt a key before its first request)", key, scope)
	}
	if len(s.st.entries) >= s.cfg.MaxKeys {
		return fmt.Errorf("key store full (%d keys)", s.cfg.MaxKeys)
	}
	s.preemptLocked(sk, now, hold)
	return nil
}

// preemptLocked commits someone else's request for sk, processing for
// hold.
func (s *Server) preemptLocked(sk scopeKey, now time.Time, hold time.Duration) *entry {
	s.nextID++
	e := &entry{
		sk: sk, digest: foreignDigest, committedAt: now, state: stateSucceeded,
		resourceID: fmt.Sprintf("ord_%06d", s.nextID), foreign: true,
		order: s.cfg.Behavior.KeyMember != "", orderID: s.nextID,
		doneAt: now.Add(hold), retryAfter: time.Second,
	}
	e.counts.ForeignEffects = 1
	if prev, ok := s.st.entries[sk]; ok {
		// The key's order before it (a declined order API's, any under
		// KeyIgnored) is still counted.
		e.counts.add(prev.counts)
	}
	s.stats.ForeignEffects++
	s.st.add(e)
	return e
}

// foreignDigest is the digest of someone else's request: no request the
// server receives has it (it is not a SHA-256 output anyone can aim at).
var foreignDigest = [32]byte{'f', 'o', 'r', 'e', 'i', 'g', 'n'}

// Requests returns a copy of the log of requests received, in arrival
// order: the last [MaxRequestLog] of them, control requests excluded.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.requests()
}

// ServeHTTP answers r; see the package documentation for the HTTP surface.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Date on the server's clock, as a real origin server sends it on
	// every answer (RFC 9110 6.6.1): net/http's own reads the wall
	// clock, not the one the tests inject, and clients judge Retry-After
	// and the key window by it.
	w.Header().Set("Date", s.cfg.Now().UTC().Format(http.TimeFormat))
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, "/_"):
		s.control(w, r)
	case strings.HasPrefix(path, "/operations/"):
		if r.Method != http.MethodGet {
			s.reject(w, r, classQuery, http.StatusMethodNotAllowed, "method not allowed", "GET")
			return
		}
		s.query(w, r)
	case isSubmitMethod(r.Method):
		s.submit(w, r)
	default:
		s.reject(w, r, classOther, http.StatusMethodNotAllowed, "method not allowed", "POST, PUT, PATCH, DELETE")
	}
}

func isSubmitMethod(m string) bool {
	switch m {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// requestClass says which counter a request adds to.
type requestClass int

const (
	classOther requestClass = iota
	classSubmit
	classQuery
)

// logLocked counts and logs req and returns its sequence number for
// finishLocked.
func (s *Server) logLocked(req Request, class requestClass) uint64 {
	s.stats.Requests++
	switch class {
	case classSubmit:
		s.stats.Submits++
	case classQuery:
		s.stats.Queries++
	}
	return s.log.add(req)
}

// finishLocked records the answer to a logged request, unless Reset came in
// between. It runs before the answer is written, so a client that has read
// the answer sees it in the log.
func (s *Server) finishLocked(gen, seq uint64, status int, fault FaultKind) {
	if gen != s.gen {
		return
	}
	if req := s.log.at(seq); req != nil {
		req.Status, req.Fault = status, fault
	}
}

// newRequest starts the log record of r.
func (s *Server) newRequest(r *http.Request) Request {
	return Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Scope:  r.Header.Get(s.cfg.ScopeHeader),
		RawKey: s.rawKey(r),
		At:     s.cfg.Now(),
	}
}

// rawKey returns the key header's value, or "" for an order API, which
// reads no key header (its key is found in the body, or the path of a
// result query).
func (s *Server) rawKey(r *http.Request) string {
	if s.cfg.Behavior.KeyMember != "" {
		return ""
	}
	return r.Header.Get(s.cfg.KeyHeader)
}

// reject logs r and answers it with a JSON error, with an Allow header if
// allow is not "".
func (s *Server) reject(w http.ResponseWriter, r *http.Request, class requestClass, status int, msg, allow string) {
	s.rejectRequest(w, s.newRequest(r), class, status, msg, allow)
}

func (s *Server) rejectRequest(w http.ResponseWriter, req Request, class requestClass, status int, msg, allow string) {
	req.Status = status
	s.mu.Lock()
	s.logLocked(req, class)
	s.mu.Unlock()
	if allow != "" {
		w.Header().Set("Allow", allow)
	}
	writeError(w, status, msg)
}

// control serves the /_ endpoints, which are neither counted nor logged.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	var method string
	switch r.URL.Path {
	case "/_stats", "/_behavior", "/_key":
		method = http.MethodGet
	case "/_faults", "/_reset":
		method = http.MethodPost
	default:
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	switch r.URL.Path {
	case "/_stats":
		body, _ := json.Marshal(s.Stats())
		writeJSON(w, http.StatusOK, body)
	case "/_behavior":
		writeJSON(w, http.StatusOK, marshalBehavior(s.cfg.Behavior, s.cfg.Retention))
	case "/_key":
		q := r.URL.Query()
		if !q.Has("key") {
			writeError(w, http.StatusBadRequest, "missing key parameter (GET /_key?key=K&scope=S)")
			return
		}
		body, _ := json.Marshal(s.KeyStats(q.Get("scope"), q.Get("key")))
		writeJSON(w, http.StatusOK, body)
	case "/_reset":
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case "/_faults":
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
		if err != nil {
			status, msg := bodyError(err)
			writeError(w, status, msg)
			return
		}
		var f Fault
		if err := json.Unmarshal(body, &f); err != nil {
			writeError(w, http.StatusBadRequest, "invalid fault: "+err.Error())
			return
		}
		if err := s.inject(f); err != nil {
			// The fault is valid, the queue is full: "invalid fault" would
			// send the caller to fix the wrong thing.
			if errors.Is(err, errTooManyFaults) {
				writeError(w, http.StatusServiceUnavailable, "fault not scripted: "+err.Error()+"; POST /_reset resets the server")
				return
			}
			writeError(w, http.StatusBadRequest, "invalid fault: "+err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// takeFaultLocked consumes the first scripted fault that matches, else
// applies the profile's pick if it matches. drawn is the profile's pick for
// this request ("" for none).
func (s *Server) takeFaultLocked(key string, query bool, out outcome, drawn FaultKind) (applied, bool) {
	for i := range s.faults {
		f := &s.faults[i]
		if f.Query != query || (f.Key != "" && f.Key != key) || !matches(f.Kind, query, out, s.cfg.Behavior) {
			continue
		}
		a := applied{kind: f.Kind, delay: f.Delay, retryAfter: f.RetryAfter, httpDate: f.HTTPDate}
		if f.Count--; f.Count == 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return a, true
	}
	if drawn != "" && matches(drawn, query, out, s.cfg.Behavior) {
		p := s.profile
		return applied{kind: drawn, delay: p.Delay, retryAfter: p.RetryAfter, httpDate: p.HTTPDate}, true
	}
	return applied{}, false
}

// drawLocked draws once from the RNG and returns the profile's pick, or ""
// for none.
func (s *Server) drawLocked() FaultKind {
	x := s.rng.Float64()
	acc := 0.0
	for _, k := range faultKinds {
		acc += s.profile.Rates[k]
		if x < acc {
			return k
		}
	}
	return ""
}

// matches reports whether a fault of kind k applies to a request with the
// given outcome, under behaviour b.
func matches(k FaultKind, query bool, out outcome, b Behavior) bool {
	switch {
	case query:
		return k.queryable()
	case k.storedUnder(b):
		return out == outExecute
	case k.replacesProcessing():
		return true
	case k.shapesCommit():
		return out == outExecute
	default:
		return out == outExecute || out == outReplay
	}
}

// applied is a fault picked for one request, with its parameters.
type applied struct {
	kind       FaultKind
	delay      time.Duration
	retryAfter time.Duration
	httpDate   bool
}
