package cli

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

// timeLayout prints instants in UTC to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// secretHeader reports whether a header named name holds a credential.
// The client refuses to journal them, but records journaled before it
// refused API-specific names (KC-API-PASSPHRASE, X-MBX-APIKEY) may hold
// one; idem redacts them all the same.
func secretHeader(name string) bool { return httpsyntax.CredentialHeader(name) }

// recordJSON is the JSON form of a record, for list -json and show -json.
// Its field names are part of idem's command-line interface.
type recordJSON struct {
	Key        string              `json:"key"`
	Scope      string              `json:"scope"`
	Ref        string              `json:"ref,omitempty"`
	State      journal.State       `json:"state"`
	Review     string              `json:"review,omitempty"`
	Method     string              `json:"method"`
	URL        string              `json:"url"`
	ResultURL  string              `json:"result_url,omitempty"`
	Header     map[string][]string `json:"header,omitempty"`
	Body       *string             `json:"body,omitempty"`        // when printable UTF-8
	BodyBase64 *string             `json:"body_base64,omitempty"` // otherwise
	BodySize   int                 `json:"body_size"`
	BodySHA256 string              `json:"body_sha256"`
	Result     *resultJSON         `json:"result,omitempty"`
	Resolved   *resolvedJSON       `json:"resolved,omitempty"`
	Created    time.Time           `json:"created"`
	FirstSent  *time.Time          `json:"first_sent,omitempty"`
	Updated    *time.Time          `json:"updated,omitempty"`
	Settled    *time.Time          `json:"settled,omitempty"`
	NextDue    *time.Time          `json:"next_due,omitempty"`
	Attempts   []attemptJSON       `json:"attempts"`
	// Trace: the trace context of the call that journaled it, to find
	// the request that started a stuck operation.
	Trace string `json:"trace,omitempty"`
	// KeyPlacement: where the Client that journaled it put the key
	// (journal.Record.KeyPlacement), which a Client driving it must too.
	KeyPlacement string `json:"key_placement,omitempty"`
	// Confirmations: outcomes learned from outside (webhook events).
	Confirmations []confirmationJSON `json:"confirmations,omitempty"`
}

type confirmationJSON struct {
	Source     string        `json:"source"`
	EventID    string        `json:"event_id"`
	State      journal.State `json:"state"`
	ResourceID string        `json:"resource_id,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	StatusCode int           `json:"status_code,omitempty"`
	At         time.Time     `json:"at"`
	Effect     string        `json:"effect"` // settled, agreed or conflicted
	// KeyInUse: the server's answer said another request holds the key.
	KeyInUse bool `json:"key_in_use,omitempty"`
}

type resultJSON struct {
	ResourceID string  `json:"resource_id,omitempty"`
	StatusCode int     `json:"status_code,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Replayed   bool    `json:"replayed,omitempty"` // the server's stored answer for the key
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"body_base64,omitempty"`
}

type resolvedJSON struct {
	By     string        `json:"by"`
	Reason string        `json:"reason"`
	At     time.Time     `json:"at"`
	From   journal.State `json:"from"`
}

type attemptJSON struct {
	Number     int                 `json:"number"`
	Kind       journal.AttemptKind `json:"kind"`
	Start      time.Time           `json:"start"`
	Wrote      bool                `json:"wrote"`
	Resent     bool                `json:"resent,omitempty"` // net/http sent it twice: both copies may have executed
	Done       bool                `json:"done"`
	Refused    bool                `json:"refused"`  // the answer says this attempt did not execute
	Replayed   bool                `json:"replayed"` // the answer was the server's stored one for the key
	Status     int                 `json:"status,omitempty"`
	Err        string              `json:"error,omitempty"`
	RetryAfter string              `json:"retry_after,omitempty"`
	Duration   string              `json:"duration,omitempty"`
}

func toJSON(r *journal.Record) recordJSON {
	j := recordJSON{
		Key:          r.Key,
		Scope:        r.Scope,
		Ref:          r.Ref,
		State:        r.State,
		Review:       r.Review,
		Method:       r.Method,
		URL:          httpsyntax.RedactURL(r.URL),
		ResultURL:    httpsyntax.RedactURL(r.QueryURL),
		Header:       redact(r.Header),
		BodySize:     len(r.Body),
		BodySHA256:   hex.EncodeToString(r.BodySHA[:]),
		Created:      r.Created.UTC(),
		FirstSent:    optTime(r.FirstSent),
		Updated:      optTime(r.Updated),
		Settled:      optTime(r.Settled),
		NextDue:      optTime(r.NextDue),
		Attempts:     []attemptJSON{},
		Trace:        r.Trace,
		KeyPlacement: r.KeyPlacement,
	}
	j.Body, j.BodyBase64 = bodyJSON(r.Body)
	if res := r.Result; res != nil {
		j.Result = &resultJSON{ResourceID: res.ResourceID, StatusCode: res.StatusCode, Reason: res.Reason, Replayed: res.Replayed}
		j.Result.Body, j.Result.BodyBase64 = bodyJSON(res.Body)
	}
	if m := r.Resolved; m != nil {
		j.Resolved = &resolvedJSON{By: m.By, Reason: m.Reason, At: m.At.UTC(), From: m.From}
	}
	if r.State.Terminal() {
		j.NextDue = nil // never due again (see writeRecord)
	}
	for _, c := range r.Confirmations {
		j.Confirmations = append(j.Confirmations, confirmationJSON{Source: c.Source, EventID: c.EventID, State: c.State,
			ResourceID: c.ResourceID, Reason: c.Reason, StatusCode: c.StatusCode, At: c.At.UTC(), Effect: c.Effect.String(), KeyInUse: c.KeyInUse})
	}
	for _, a := range r.Attempts {
		aj := attemptJSON{
			Number: a.Number, Kind: a.Kind, Start: a.Start.UTC(), Wrote: a.Wrote,
			Done: a.Done, Resent: a.Resent, Refused: a.Refused, Replayed: a.Replayed, Status: a.Status, Err: httpsyntax.RedactURLsIn(a.Err, r.URL, r.QueryURL),
		}
		if a.RetryAfter > 0 {
			aj.RetryAfter = a.RetryAfter.String()
		}
		if a.Done {
			aj.Duration = a.Duration.String()
		}
		j.Attempts = append(j.Attempts, aj)
	}
	return j
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// bodyJSON returns b as text if it is printable, else as base64; both nil
// for an empty body.
func bodyJSON(b []byte) (text, b64 *string) {
	if len(b) == 0 {
		return nil, nil
	}
	if printable(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// redact returns a copy of h with secret headers' values replaced.
func redact(h http.Header) map[string][]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		if secretHeader(k) {
			out[k] = []string{"[redacted]"}
			continue
		}
		out[k] = slices.Clone(vs)
	}
	return out
}

// printable reports whether b is UTF-8 text that is safe to print on a
// terminal: no control characters but newlines and tabs.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	s := string(b)
	for _, r := range s {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	// A lone carriage return would overwrite the line on a terminal.
	return strings.Count(s, "\r") == strings.Count(s, "\r\n")
}

// clean makes a one-line value safe for a table cell or a terminal: a
// string with control characters, tabs or newlines is quoted, an empty
// one becomes "-".
func clean(s string) string {
	if s == "" {
		return "-"
	}
	// Not UTF-8 is quoted too: 0xff is text/tabwriter's escape
	// character, and the rest of a table would lose its columns.
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == '\t' }) {
		return strconv.Quote(s)
	}
	return s
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// stamp prints an instant, or "-" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

// age prints how long ago t was, coarsely: 42s, 17m, 5h12m, 3d4h.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// writeBody prints a body indented, as text if printable, else as
// base64 in lines of 76 characters.
func writeBody(w io.Writer, indent string, b []byte) {
	if printable(b) {
		text := strings.ReplaceAll(string(b), "\r\n", "\n")
		for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
			fmt.Fprintf(w, "%s%s\n", indent, line)
		}
		return
	}
	s := base64.StdEncoding.EncodeToString(b)
	for len(s) > 76 {
		fmt.Fprintf(w, "%s%s\n", indent, s[:76])
		s = s[76:]
	}
	fmt.Fprintf(w, "%s%s\n", indent, s)
}

// bodyKind names how writeBody prints b.
func bodyKind(b []byte) string {
	if printable(b) {
		return "text"
	}
	return "base64"
}
