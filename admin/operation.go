package admin

import (
	"time"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

// Operation is the JSON form of a journaled operation. Its field names are
// stable (see the package documentation). It holds no request or response
// body and no header: the handler serves only the state of operations.
type Operation struct {
	Scope     string      `json:"scope"`
	Key       string      `json:"key"`
	Ref       string      `json:"ref,omitempty"`
	Method    string      `json:"method"`
	URL       string      `json:"url"`
	ResultURL string      `json:"result_url,omitempty"`
	State     string      `json:"state"`
	Review    string      `json:"review,omitempty"`
	Attempts  int         `json:"attempts"`
	Result    *Result     `json:"result,omitempty"`
	Resolved  *Resolution `json:"resolved,omitempty"`
	Created   time.Time   `json:"created"`
	FirstSent time.Time   `json:"first_sent"`
	Updated   time.Time   `json:"updated"`
	Settled   time.Time   `json:"settled"`
	NextDue   time.Time   `json:"next_due"`
	// Trace is the trace context of the call that journaled the
	// operation (journal.Record.Trace), by which a person finds the
	// request that started a stuck one; only in the answer for one
	// operation, with Timeline.
	Trace string `json:"trace,omitempty"`
	// KeyPlacement is where the Client that journaled the operation put
	// its key (journal.Record.KeyPlacement): a Client putting it
	// elsewhere leaves it unsent (idem.ReviewKeyMoved); only in the
	// answer for one operation, with Timeline.
	KeyPlacement string `json:"key_placement,omitempty"`
	// Timeline is the journaled attempts, oldest first; only in the
	// answer for one operation.
	Timeline []Attempt `json:"timeline,omitempty"`
	// Confirmations: what webhook events (Client.Confirm) said about the
	// operation, a contradiction included; at most journal.MaxConfirmations.
	Confirmations []Confirmation `json:"confirmations,omitempty"`
}

// Result is what the server answered that settled (or will settle) an
// operation, without its body.
type Result struct {
	ResourceID string `json:"resource_id,omitempty"`
	StatusCode int    `json:"status_code"`
	Reason     string `json:"reason,omitempty"`
	Replayed   bool   `json:"replayed"`
}

// Resolution is a manual settlement: who, why, when, from which state.
type Resolution struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	From   string    `json:"from"`
}

// Confirmation is one external confirmation of the operation's outcome.
type Confirmation struct {
	Source     string    `json:"source"`
	EventID    string    `json:"event_id"`
	State      string    `json:"state"`
	ResourceID string    `json:"resource_id,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	StatusCode int       `json:"status_code,omitempty"`
	At         time.Time `json:"at"`
	Effect     string    `json:"effect"` // settled, agreed, conflicted
	// KeyInUse: the server's answer to a request of ours said another
	// request holds the key (journal.Confirmation.KeyInUse).
	KeyInUse bool `json:"key_in_use,omitempty"`
}

// effects reads Confirmation.Effect back.
var effects = map[string]journal.ConfirmEffect{}

func init() {
	for e := journal.ConfirmInvalid; e <= journal.ConfirmDuplicate; e++ {
		effects[e.String()] = e
	}
}

// Attempt is one journaled HTTP exchange.
type Attempt struct {
	Number     int       `json:"number"`
	Kind       string    `json:"kind"` // "submit" or "query"
	Start      time.Time `json:"start"`
	Wrote      bool      `json:"wrote"`
	Done       bool      `json:"done"`
	Replayed   bool      `json:"replayed"`
	Refused    bool      `json:"refused"`
	Resent     bool      `json:"resent,omitempty"` // net/http sent it twice: two copies may have executed
	Status     int       `json:"status"`
	Error      string    `json:"error,omitempty"`
	RetryAfter float64   `json:"retry_after_seconds"`
	Duration   float64   `json:"duration_seconds"`
}

// FromRecord converts a journaled record, leaving out its bodies and
// headers; timeline adds the attempts.
func FromRecord(r *journal.Record, timeline bool) *Operation {
	n := 0
	if len(r.Attempts) > 0 {
		n = r.Attempts[len(r.Attempts)-1].Number
	}
	op := &Operation{
		Scope: r.Scope, Key: r.Key, Ref: r.Ref, Method: r.Method, URL: httpsyntax.RedactURL(r.URL), ResultURL: httpsyntax.RedactURL(r.QueryURL),
		State: string(r.State), Review: r.Review, Attempts: n,
		Created: r.Created, FirstSent: r.FirstSent, Updated: r.Updated, Settled: r.Settled, NextDue: r.NextDue,
	}
	if res := r.Result; res != nil {
		op.Result = &Result{ResourceID: res.ResourceID, StatusCode: res.StatusCode, Reason: res.Reason, Replayed: res.Replayed}
	}
	if m := r.Resolved; m != nil {
		op.Resolved = &Resolution{By: m.By, Reason: m.Reason, At: m.At, From: string(m.From)}
	}
	for _, c := range r.Confirmations {
		op.Confirmations = append(op.Confirmations, Confirmation{
			Source: c.Source, EventID: c.EventID, State: string(c.State), ResourceID: c.ResourceID,
			Reason: c.Reason, StatusCode: c.StatusCode, At: c.At, Effect: c.Effect.String(), KeyInUse: c.KeyInUse,
		})
	}
	if timeline {
		op.Trace = r.Trace
		op.KeyPlacement = r.KeyPlacement
		op.Timeline = make([]Attempt, len(r.Attempts))
		for i, a := range r.Attempts {
			op.Timeline[i] = Attempt{
				Number: a.Number, Kind: string(a.Kind), Start: a.Start, Wrote: a.Wrote, Done: a.Done,
				Replayed: a.Replayed, Refused: a.Refused, Resent: a.Resent, Status: a.Status, Error: httpsyntax.RedactURLsIn(a.Err, r.URL, r.QueryURL),
				RetryAfter: a.RetryAfter.Seconds(), Duration: a.Duration.Seconds(),
			}
		}
	}
	return op
}

// Record converts back to a journal record, without bodies or headers
// (the handler never serves them): what the idem command's remote mode
// formats as it formats a record read from a journal file.
func (o *Operation) Record() *journal.Record {
	r := &journal.Record{
		Scope: o.Scope, Key: o.Key, Ref: o.Ref, Method: o.Method, URL: o.URL, QueryURL: o.ResultURL,
		State: journal.State(o.State), Review: o.Review,
		Created: o.Created, FirstSent: o.FirstSent, Updated: o.Updated, Settled: o.Settled, NextDue: o.NextDue,
		Trace: o.Trace, KeyPlacement: o.KeyPlacement,
	}
	if res := o.Result; res != nil {
		r.Result = &journal.Result{ResourceID: res.ResourceID, StatusCode: res.StatusCode, Reason: res.Reason, Replayed: res.Replayed}
	}
	if m := o.Resolved; m != nil {
		r.Resolved = &journal.Resolution{By: m.By, Reason: m.Reason, At: m.At, From: journal.State(m.From)}
	}
	for _, c := range o.Confirmations {
		r.Confirmations = append(r.Confirmations, journal.Confirmation{
			Source: c.Source, EventID: c.EventID, State: journal.State(c.State), ResourceID: c.ResourceID,
			Reason: c.Reason, StatusCode: c.StatusCode, At: c.At, Effect: effects[c.Effect], KeyInUse: c.KeyInUse,
		})
	}
	for _, a := range o.Timeline {
		r.Attempts = append(r.Attempts, journal.Attempt{
			Number: a.Number, Kind: journal.AttemptKind(a.Kind), Start: a.Start, Wrote: a.Wrote, Done: a.Done,
			Replayed: a.Replayed, Refused: a.Refused, Resent: a.Resent, Status: a.Status, Err: a.Error,
			RetryAfter: time.Duration(a.RetryAfter * float64(time.Second)), Duration: time.Duration(a.Duration * float64(time.Second)),
		})
	}
	return r
}
