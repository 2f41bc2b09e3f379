package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/recordable"
	"github.com/idemkit/idem/journal"
)

// Limits of a list page.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// maxResolveBody bounds a resolve request's body.
const maxResolveBody = 64 << 10

// An Option configures the handler.
type Option interface{ apply(*handler) }

type optionFunc func(*handler)

func (f optionFunc) apply(h *handler) { f(h) }

// WithClock sets the clock the handler measures ages with; use the
// Client's (WithClock) so that ages agree with the journal's times.
// Default (and with a nil clk): the wall clock.
func WithClock(clk idem.Clock) Option {
	return optionFunc(func(h *handler) {
		// NewHandler has no error to return: a nil clock must not panic
		// in the service that mounts the handler.
		if clk != nil {
			h.now = clk.Now
		}
	})
}

// WithOperator names who sends a request, from what your authentication
// middleware verified (a login in the request's context, a client
// certificate's subject), for the audit trail of POST /resolve. Without it
// the body's "by" is recorded as sent, and whoever reaches the handler can
// write any name there.
//
// With it, the name who returns is recorded as "by". A body "by" that names
// someone else (the idem command sends -by, default $USER) is kept beside
// it, "alice (said bob)", when both fit in by's 255 bytes. An error or an
// empty name refuses the resolve with 403, before anything is written;
// the error's text is the answer's, for the operator to act on, so who
// must not put in it what the caller may not see (a token, a DSN).
// A nil who is ignored.
func WithOperator(who func(*http.Request) (string, error)) Option {
	return optionFunc(func(h *handler) {
		if who != nil {
			h.operator = who
		}
	})
}

type handler struct {
	c        *idem.Client
	now      func() time.Time
	operator func(*http.Request) (string, error)
	routes   map[string]route
	// csrf refuses a state-changing request a browser sends for another
	// site (Sec-Fetch-Site, else Origin against Host): authentication by
	// cookie lets such a request in with the operator's rights.
	csrf *http.CrossOriginProtection
}

// route is an endpoint's method and what serves it.
type route struct {
	method string
	serve  func(http.ResponseWriter, *http.Request) error
}

// NewHandler returns the admin handler for c. Mount it behind your own
// authentication and authorization: it lets whoever reaches it read every
// operation's state and settle operations by hand. For example:
//
//	mux.Handle("/idem/", http.StripPrefix("/idem", requireOperator(admin.NewHandler(c))))
func NewHandler(c *idem.Client, opts ...Option) http.Handler {
	h := &handler{c: c, now: time.Now, csrf: http.NewCrossOriginProtection()}
	for _, o := range opts {
		// Skipped, as idem.New skips one: NewHandler has no error to
		// return, and must not panic in the service that mounts it.
		if o != nil {
			o.apply(h)
		}
	}
	h.routes = map[string]route{
		"/operations":          {http.MethodGet, h.list},
		"/operation":           {http.MethodGet, h.show},
		"/stats":               {http.MethodGet, h.stats},
		"/health":              {http.MethodGet, h.health},
		"/resolve":             {http.MethodPost, h.resolve},
		"/key-ignoring":        {http.MethodGet, h.keyIgnoring},
		"/key-ignoring/remove": {http.MethodPost, h.removeKeyIgnoring},
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := h.routes[strings.TrimSuffix(r.URL.Path, "/")]
	switch {
	case !ok:
		writeError(w, &Error{http.StatusNotFound, "not_found", "no such endpoint; see the package documentation of github.com/idemkit/idem/admin"})
		return
	case r.Method != rt.method:
		w.Header().Set("Allow", rt.method)
		writeError(w, &Error{http.StatusMethodNotAllowed, "method_not_allowed", "use " + rt.method})
		return
	}
	if h.c == nil {
		// Open's result mounted after its error was ignored: say so on
		// every request, rather than panic in Health or blame the journal.
		writeError(w, &Error{http.StatusServiceUnavailable, "unavailable",
			"the admin handler was made with a nil *idem.Client: pass NewHandler the Client idem.Open or idem.New returned, and check their error"})
		return
	}
	if err := h.csrf.Check(r); err != nil {
		writeError(w, &Error{http.StatusForbidden, "forbidden", "a browser sent this request for another site (cross-site request forgery?); " +
			"send it from the handler's own origin, or from a client that is not a browser"})
		return
	}
	if err := rt.serve(w, r); err != nil {
		writeError(w, err)
	}
}

// Error is the JSON body of every error answer: {"error": {"code": …,
// "message": …}}.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"` // not_found, bad_request, conflict, method_not_allowed, forbidden, unsupported_media_type, unavailable
	Message string `json:"message"`
}

func (e *Error) Error() string { return "admin: " + e.Message }

func badRequest(format string, args ...any) error {
	return &Error{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, args...)}
}

// clientError maps the Client's errors to answers.
func clientError(err error) error {
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return &Error{http.StatusNotFound, "not_found", err.Error()}
	case errors.Is(err, idem.ErrInvalidRequest), errors.Is(err, journal.ErrInvalid):
		// journal.ErrInvalid: a scope or key the journal cannot hold
		// (a NUL byte, too long), the caller's to fix.
		return &Error{http.StatusBadRequest, "bad_request", err.Error()}
	case errors.Is(err, journal.ErrKeyIgnoringFull), errors.Is(err, journal.ErrLeased), errors.Is(err, journal.ErrFlaggedKeyIgnored):
		// The journal's state, the operator's to change or wait out,
		// not a broken handler: a resolution refused until the operator
		// makes room for the endpoint its flag tells of (POST
		// /key-ignoring/remove); refused while the operation is driven
		// (journal.ErrLeased: its request may be on the wire), to retry
		// once the drive ends, or force; or flagged by another replica
		// while it ran, nothing written, a race the next try wins (it
		// journals the endpoint first).
		return &Error{http.StatusConflict, "conflict", err.Error()}
	case errors.Is(err, idem.ErrClosed), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// A wait the Client gave up (ForgetKeyIgnoring's for a save
		// under way), or the request's own end: nothing done, to be
		// tried again.
		return &Error{http.StatusServiceUnavailable, "unavailable", err.Error()}
	}
	return &Error{http.StatusInternalServerError, "internal", err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{http.StatusInternalServerError, "internal", err.Error()}
	}
	writeJSON(w, e.Status, map[string]*Error{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away: nothing to tell it
}

// Page is the answer of GET /operations.
type Page struct {
	Operations []*Operation `json:"operations"`
	// Next is the cursor of the next page; empty on the last one.
	Next string `json:"next,omitempty"`
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := idem.Filter{Scope: q.Get("scope")}
	f.AllScopes = f.Scope == ""
	for _, s := range splitList(q.Get("state")) {
		st := idem.State(s)
		if !st.Valid() || st == "" {
			return badRequest("state %q: want pending, processing, unknown, succeeded or failed (comma-separated)", s)
		}
		f.States = append(f.States, st)
	}
	if v := q.Get("flagged"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("flagged %q: want true or false", v)
		}
		f.Review = b
	}
	if v := q.Get("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return badRequest("older_than %q: want a non-negative Go duration such as 15m or 2h", v)
		}
		f.OlderThan = d
	}
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return badRequest("limit %q: want a number from 1 to %d", v, MaxLimit)
		}
		limit = n
	}
	timeline := false
	if v := q.Get("timeline"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("timeline %q: want true or false", v)
		}
		timeline = b
	}
	after, err := decodeCursor(q.Get("cursor"))
	if err != nil {
		return err
	}
	f.After = after
	// One more tells whether there is a next page; the journal starts
	// after the cursor, so a later page costs what the first one does.
	f.Limit = limit + 1
	ops, err := h.c.List(r.Context(), f)
	if err != nil {
		return clientError(err)
	}
	if past := pastCursor(ops, after); len(past) < len(ops) {
		// A Store written before Filter.After lists from the start
		// whatever the bound, and each page would be the first again,
		// next unchanged: a client following next never ends. Such a
		// Store is read whole, as every page was before the bound.
		if len(ops) == f.Limit {
			whole := f
			whole.Limit = 0
			if ops, err = h.c.List(r.Context(), whole); err != nil {
				return clientError(err)
			}
			past = pastCursor(ops, after)
		}
		ops = past[:min(len(past), f.Limit)]
	}
	page := Page{Operations: []*Operation{}}
	for _, op := range ops {
		if len(page.Operations) == limit {
			last := page.Operations[limit-1]
			page.Next = encodeCursor(cursorOf(last.Scope, last.Key))
			break
		}
		rec, err := h.c.Record(r.Context(), op.Scope, op.Key)
		if errors.Is(err, idem.ErrNotFound) {
			continue // pruned since List
		}
		if err != nil {
			return clientError(err)
		}
		page.Operations = append(page.Operations, FromRecord(rec, timeline))
	}
	if page.Next == "" && len(ops) == f.Limit {
		// The journal holds more than List returned, and the page is
		// not full only because some were pruned since List: the rest
		// start after the last one it returned, read or pruned.
		last := ops[len(ops)-1]
		page.Next = encodeCursor(cursorOf(last.Scope, last.Key))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// pastCursor is ops without those up to after, in (scope, key) order.
func pastCursor(ops []*idem.Operation, after journal.Position) []*idem.Operation {
	if after == (journal.Position{}) {
		return ops
	}
	c := cursorOf(after.Scope, after.Key)
	i := 0
	for i < len(ops) && cursorOf(ops[i].Scope, ops[i].Key) <= c {
		i++
	}
	return ops[i:]
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// The cursor is the last (scope, key) of a page, in the journal's order:
// opaque to clients, and stable across writes.
func cursorOf(scope, key string) string { return scope + "\x00" + key }

func encodeCursor(c string) string { return base64.RawURLEncoding.EncodeToString([]byte(c)) }

// decodeCursor returns the journal's bound for the page after cursor v; no
// bound for an empty v.
func decodeCursor(v string) (journal.Position, error) {
	if v == "" {
		return journal.Position{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	scope, key, ok := strings.Cut(string(b), "\x00")
	// A second NUL is in no cursor of ours, and no key: the journal
	// would refuse it less clearly.
	if err != nil || !ok || strings.Contains(key, "\x00") {
		return journal.Position{}, badRequest("cursor %q: pass the next value of a previous page unchanged", v)
	}
	return journal.Position{Scope: scope, Key: key}, nil
}

func (h *handler) show(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	key := q.Get("key")
	if key == "" {
		return badRequest("key is required: /operation?scope=S&key=K (an empty scope is the client's default)")
	}
	rec, err := h.c.Record(r.Context(), q.Get("scope"), key)
	if err != nil {
		return clientError(err)
	}
	writeJSON(w, http.StatusOK, FromRecord(rec, true))
	return nil
}

// Stats is the answer of GET /stats.
type Stats struct {
	ByState  map[string]int `json:"by_state"`
	Open     int            `json:"open"`
	Review   int            `json:"review"`
	Total    int            `json:"total"`
	Complete bool           `json:"complete"` // by_state and total count settled operations too
	// Ages in seconds of the oldest open and unknown operations, 0 if none.
	OldestOpenAge    float64 `json:"oldest_open_age_seconds"`
	OldestUnknownAge float64 `json:"oldest_unknown_age_seconds"`
	RetryTokens      float64 `json:"retry_tokens"`
	RetryTokensMax   float64 `json:"retry_tokens_max"`
	// RetryTokensByHost: the hosts whose retry budget is below full (see
	// idem.Stats).
	RetryTokensByHost map[string]float64 `json:"retry_tokens_by_host,omitempty"`
	// LostLogSegments: see idem.Stats.
	LostLogSegments int `json:"lost_log_segments"`
	// Newer: see idem.Stats.
	Newer int `json:"newer_records"`
	// NewerOpen: see idem.Stats.
	NewerOpen int `json:"newer_open_records"`
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request) error {
	st, err := h.c.Stats(r.Context())
	if err != nil {
		return clientError(err)
	}
	out := Stats{
		ByState: make(map[string]int), Open: st.Open, Review: st.Review, Total: st.Total, Complete: st.Complete,
		OldestOpenAge: h.age(st.OldestOpen), OldestUnknownAge: h.age(st.OldestUnknown),
		RetryTokens: st.RetryTokens, RetryTokensMax: st.RetryTokensMax, RetryTokensByHost: st.RetryTokensByHost,
		LostLogSegments: st.LostLogSegments, Newer: st.Newer, NewerOpen: st.NewerOpen,
	}
	for s, n := range st.ByState {
		out.ByState[string(s)] = n
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) age(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return max(0, h.now().Sub(t).Seconds())
}

// Health is the answer of GET /health: 200 when OK, 503 otherwise.
type Health struct {
	OK bool `json:"ok"` // journal_ok and run_active
	// JournalOK: the journal can be read and Run's last pass, if any,
	// wrote it without error.
	JournalOK          bool       `json:"journal_ok"`
	JournalError       string     `json:"journal_error,omitempty"`
	RunActive          bool       `json:"run_active"`
	RunError           string     `json:"run_error,omitempty"`
	LastPass           *time.Time `json:"last_pass,omitempty"`
	ConsecutiveErrors  int        `json:"consecutive_errors"`
	LastJournalError   string     `json:"last_journal_error,omitempty"`
	LastJournalErrorAt *time.Time `json:"last_journal_error_at,omitempty"`
	RetryAt            *time.Time `json:"retry_at,omitempty"`
	RetryTokens        float64    `json:"retry_tokens"`
	RetryTokensMax     float64    `json:"retry_tokens_max"`
	// Hosts Run cannot reach, that answer it slowly, or that asked it to
	// wait (idem.Health.Hosts);
	// an empty list when none. They do not make OK false: a payment API
	// down is not this service down.
	Hosts        []HostHealth `json:"hosts"`
	HostsOmitted int          `json:"hosts_omitted,omitempty"`
}

// HostHealth is one entry of Health.Hosts (idem.HostHealth).
type HostHealth struct {
	Host            string     `json:"host"`
	FailedVisits    int        `json:"failed_visits"`
	FailingSince    *time.Time `json:"failing_since,omitempty"`
	LastFailedVisit *time.Time `json:"last_failed_visit,omitempty"`
	DownSince       *time.Time `json:"down_since,omitempty"`
	SlowSince       *time.Time `json:"slow_since,omitempty"`
	RestUntil       *time.Time `json:"rest_until,omitempty"`
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) error {
	hl := h.c.Health()
	out := Health{
		RunActive: hl.RunActive, ConsecutiveErrors: hl.ConsecutiveErrors,
		LastPass: timePtr(hl.LastPass), LastJournalErrorAt: timePtr(hl.LastJournalErrorAt), RetryAt: timePtr(hl.RetryAt),
		Hosts: make([]HostHealth, 0, len(hl.Hosts)), HostsOmitted: hl.HostsOmitted,
	}
	for _, hh := range hl.Hosts {
		out.Hosts = append(out.Hosts, HostHealth{Host: hh.Host, FailedVisits: hh.FailedVisits,
			FailingSince: timePtr(hh.FailingSince), LastFailedVisit: timePtr(hh.LastFailedVisit), DownSince: timePtr(hh.DownSince), SlowSince: timePtr(hh.SlowSince), RestUntil: timePtr(hh.RestUntil)})
	}
	if hl.RunErr != nil {
		out.RunError = hl.RunErr.Error()
	}
	if hl.LastJournalError != nil {
		out.LastJournalError = hl.LastJournalError.Error()
	}
	st, err := h.c.Stats(r.Context())
	switch {
	case err != nil:
		out.JournalError = err.Error()
	case hl.ConsecutiveErrors > 0:
		out.JournalError = out.LastJournalError
	default:
		out.JournalOK = true
	}
	out.RetryTokens, out.RetryTokensMax = st.RetryTokens, st.RetryTokensMax
	out.OK = out.JournalOK && out.RunActive
	status := http.StatusOK
	if !out.OK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
	return nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ResolveRequest is the body of POST /resolve.
type ResolveRequest struct {
	Scope      string `json:"scope"` // empty: the client's default
	Key        string `json:"key"`
	State      string `json:"state"` // succeeded or failed
	ResourceID string `json:"resource_id,omitempty"`
	Reason     string `json:"reason"`
	By         string `json:"by"`
	// Force allows changing an operation that is already settled, and
	// resolving one that is being driven, whose request may be on the
	// wire (idem.Resolution.Force).
	Force bool `json:"force,omitempty"`
}

// maxBy is the most a resolution's by holds (idem.Resolution.By).
const maxBy = recordable.MaxID

// operatorName is the by a resolve records under WithOperator: the name
// the service verified, with the name the body claims beside it when they
// differ, so that neither is lost and the verified one leads.
func (h *handler) operatorName(r *http.Request, claimed string) (string, error) {
	name, err := h.operator(r)
	name = strings.TrimSpace(name)
	switch {
	case err != nil:
		return "", &Error{http.StatusForbidden, "forbidden", "the service could not name the operator of this request (WithOperator): " + err.Error()}
	case name == "":
		return "", &Error{http.StatusForbidden, "forbidden", "the service named no operator for this request (WithOperator); a manual settlement must say who made it"}
	case len(name) > maxBy || !recordable.Name(name):
		// The service's naming is at fault, not the operator's request:
		// say so rather than blame the body.
		return "", &Error{http.StatusForbidden, "forbidden", fmt.Sprintf(
			"the operator's name from WithOperator is not recordable (%d bytes, at most %d, printable UTF-8); fix the service's WithOperator function", len(name), maxBy)}
	}
	if claimed == "" || claimed == name {
		return name, nil
	}
	if both := name + " (said " + claimed + ")"; len(both) <= maxBy && recordable.Name(claimed) {
		return both, nil
	}
	return name, nil
}

// ResolveAnswer is the answer of POST /resolve.
type ResolveAnswer struct {
	From      string     `json:"from"`
	Operation *Operation `json:"operation"`
}

// decodeBody decodes a POST's JSON body into v; want says what the object
// holds, one what one request does, for the messages.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, want, one string) error {
	// Only JSON: a browser sends a form or a text/plain body to any site
	// without asking, and either can be made to parse as JSON.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &Error{http.StatusUnsupportedMediaType, "unsupported_media_type",
			fmt.Sprintf("Content-Type %q: send the body as application/json", r.Header.Get("Content-Type"))}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxResolveBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("body: want a JSON object with %s: %v", want, err)
	}
	// A second value would be dropped unread while the first is applied:
	// one change per request, so that what was asked is what was done.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("body: want one JSON object; %s per request", one)
	}
	return nil
}

func (h *handler) resolve(w http.ResponseWriter, r *http.Request) error {
	var req ResolveRequest
	if err := decodeBody(w, r, &req, "key, state, reason and by (and optionally scope, resource_id, force)", "resolve one operation"); err != nil {
		return err
	}
	st := idem.State(req.State)
	by := strings.TrimSpace(req.By)
	if h.operator != nil {
		var err error
		if by, err = h.operatorName(r, by); err != nil {
			return err
		}
	}
	switch {
	case req.Key == "":
		return badRequest("key is required")
	case !st.Terminal():
		return badRequest("state %q: want succeeded or failed", req.State)
	case strings.TrimSpace(req.Reason) == "" || by == "":
		return badRequest("by and reason are required: a manual settlement says who and why")
	}
	cur, err := h.c.Record(r.Context(), req.Scope, req.Key)
	if err != nil {
		return clientError(err)
	}
	if cur.State.Terminal() && !req.Force {
		return &Error{http.StatusConflict, "conflict", fmt.Sprintf(
			"operation %q in scope %q is already %s; pass force to change a settled operation", cur.Key, cur.Scope, cur.State)}
	}
	// OnlyOpen: an operation that settles between the check above and the
	// write keeps its outcome unless force was asked for.
	_, err = h.c.Resolve(r.Context(), cur.Scope, cur.Key, idem.Resolution{
		State: st, ResourceID: req.ResourceID, Reason: strings.TrimSpace(req.Reason), By: by,
		OnlyOpen: !req.Force, Force: req.Force,
	})
	if errors.Is(err, journal.ErrTerminal) {
		return &Error{http.StatusConflict, "conflict", fmt.Sprintf(
			"operation %q in scope %q settled while it was being resolved; pass force to change a settled operation", cur.Key, cur.Scope)}
	}
	if err != nil {
		return clientError(err)
	}
	// Read on when the request's context ends (a timeout middleware's
	// deadline passing just after the commit): the resolution is
	// written, and answered "unavailable" the operator would take it for
	// one that failed.
	rec, err := h.c.Record(context.WithoutCancel(r.Context()), cur.Scope, cur.Key)
	if err != nil {
		return clientError(err)
	}
	writeJSON(w, http.StatusOK, ResolveAnswer{From: string(cur.State), Operation: FromRecord(rec, true)})
	return nil
}

// KeyIgnoring is the answer of GET /key-ignoring.
type KeyIgnoring struct {
	// Endpoints: each endpoint the Client takes to ignore the idempotency
	// key, "METHOD URL" (idem.Client.KeyIgnoringEndpoints), sorted.
	Endpoints []string `json:"endpoints"`
}

func (h *handler) keyIgnoring(w http.ResponseWriter, r *http.Request) error {
	es, err := h.c.KeyIgnoringEndpoints(r.Context())
	if err != nil {
		return clientError(err)
	}
	writeJSON(w, http.StatusOK, KeyIgnoring{Endpoints: append([]string{}, es...)})
	return nil
}

// RemoveKeyIgnoringRequest is the body of POST /key-ignoring/remove.
type RemoveKeyIgnoringRequest struct {
	// Endpoint as GET /key-ignoring lists it: "POST https://host/path".
	Endpoint string `json:"endpoint"`
}

// RemoveKeyIgnoringAnswer is the answer of POST /key-ignoring/remove.
type RemoveKeyIgnoringAnswer struct {
	Removed string `json:"removed"` // the endpoint
}

// NoKeyIgnoringEndpoint is the message of POST /key-ignoring/remove's 404,
// the one the idem command gives for a journal file.
func NoKeyIgnoringEndpoint(endpoint string) string {
	return fmt.Sprintf("no endpoint %q is known to ignore the idempotency key; list them with `idem key-ignoring` and pass one as listed (\"METHOD URL\")", endpoint)
}

func (h *handler) removeKeyIgnoring(w http.ResponseWriter, r *http.Request) error {
	var req RemoveKeyIgnoringRequest
	if err := decodeBody(w, r, &req, "endpoint", "remove one endpoint"); err != nil {
		return err
	}
	if req.Endpoint == "" {
		return badRequest("endpoint is required: \"METHOD URL\" as GET /key-ignoring lists it")
	}
	known, err := h.c.ForgetKeyIgnoring(r.Context(), req.Endpoint)
	if errors.Is(err, journal.ErrVersion) {
		// Refused over open operations a newer idem wrote (a rollback):
		// the journal's state, to be removed with the newer idem.
		return &Error{http.StatusConflict, "conflict", err.Error()}
	}
	if err != nil {
		return clientError(err)
	}
	if !known {
		return &Error{http.StatusNotFound, "not_found", NoKeyIgnoringEndpoint(req.Endpoint)}
	}
	writeJSON(w, http.StatusOK, RemoveKeyIgnoringAnswer{Removed: req.Endpoint})
	return nil
}
