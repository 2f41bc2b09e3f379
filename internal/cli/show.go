package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem/internal/httpsyntax"
	"github.com/idemkit/idem/journal"
)

func cmdShow(e *env, args []string) (err error) {
	const name = "show"
	fs := e.flags(name)
	scope := fs.String("scope", defaultScope, "the operation's `scope`")
	asJSON := fs.Bool("json", false, "print the record as JSON")
	key, err := e.parseOperation(fs, scope, args)
	if err != nil {
		return err
	}
	var r *journal.Record
	b, err := e.backend(name)
	if err != nil {
		return err
	}
	if b != nil {
		defer closeBackend(b, &err)
		if r, err = b.Get(e.ctx, *scope, key); err != nil {
			return err
		}
	} else {
		s, rec, err := e.openRecord(name, *scope, key, false)
		if err != nil {
			return err
		}
		defer closeStore(s, &err)
		r = rec
	}
	if *asJSON {
		return writeJSON(e.stdout, toJSON(r))
	}
	writeRecord(e.stdout, e.now(), r)
	return nil
}

// writeRecord prints r in full for a person.
func writeRecord(w io.Writer, now time.Time, r *journal.Record) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, value) }
	field("key", clean(r.Key))
	field("scope", clean(r.Scope))
	field("ref", clean(r.Ref))
	field("state", clean(string(r.State)))
	if r.Review != "" {
		field("review", clean(r.Review))
	}
	field("request", clean(r.Method)+" "+clean(httpsyntax.RedactURL(r.URL)))
	field("result url", clean(httpsyntax.RedactURL(r.QueryURL)))
	if r.KeyPlacement != "" {
		// Where the key goes: a Client that puts it elsewhere leaves the
		// operation unsent (idem.ReviewKeyMoved).
		field("key placement", clean(r.KeyPlacement))
	}
	if r.Trace != "" {
		// The call that journaled it: where a person looks for why it is stuck.
		field("trace", clean(r.Trace))
	}
	field("created", stamp(r.Created)+" ("+age(now, r.Created)+" ago)")
	field("first sent", stamp(r.FirstSent))
	field("updated", stamp(r.Updated))
	// A settled operation is never due again: its NextDue is what it was
	// when it settled, and printing it would suggest otherwise.
	if r.State.Terminal() {
		field("settled", stamp(r.Settled))
	} else {
		field("next due", stamp(r.NextDue))
	}
	_ = tw.Flush()

	if len(r.Header) > 0 {
		fmt.Fprintln(w, "header:")
		h := redact(r.Header)
		names := make([]string, 0, len(h))
		for k := range h {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			for _, v := range h[k] {
				fmt.Fprintf(w, "  %s: %s\n", clean(k), clean(v))
			}
		}
	}
	switch {
	case r.BodySHA == [32]byte{}:
		// Only from the admin handler (remote mode): a journaled body,
		// even an empty one, has its digest.
		fmt.Fprintln(w, "body: not served by the admin handler (read it from the journal file)")
	case len(r.Body) == 0:
		fmt.Fprintf(w, "body: %d bytes, sha256 %x\n", len(r.Body), r.BodySHA)
	default:
		fmt.Fprintf(w, "body: %d bytes, sha256 %x, as %s:\n", len(r.Body), r.BodySHA, bodyKind(r.Body))
		writeBody(w, "  ", r.Body)
	}

	if res := r.Result; res != nil {
		fmt.Fprintln(w, "result:")
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
		status := "-"
		if res.StatusCode != 0 {
			status = strconv.Itoa(res.StatusCode)
		}
		fmt.Fprintf(tw, "  resource id:\t%s\n", clean(res.ResourceID))
		fmt.Fprintf(tw, "  status:\t%s\n", status)
		fmt.Fprintf(tw, "  replayed:\t%s\n", yesNo(res.Replayed))
		fmt.Fprintf(tw, "  reason:\t%s\n", clean(res.Reason))
		_ = tw.Flush()
		if len(res.Body) > 0 {
			fmt.Fprintf(w, "  body: %d bytes, as %s:\n", len(res.Body), bodyKind(res.Body))
			writeBody(w, "    ", res.Body)
		}
	}
	if m := r.Resolved; m != nil {
		fmt.Fprintf(w, "resolved by hand: by %s at %s, from %s: %s\n",
			clean(m.By), stamp(m.At), clean(string(m.From)), clean(m.Reason))
	}
	for _, c := range r.Confirmations {
		// The status and the key-in-use mark are what ReviewKeyInUse and a
		// conflicted effect rest on: a reviewer needs them beside the event.
		var marks string
		if c.StatusCode != 0 {
			marks += " (status " + strconv.Itoa(c.StatusCode) + ")"
		}
		if c.KeyInUse {
			marks += "; the key was held by another request"
		}
		fmt.Fprintf(w, "confirmation (%s): %s event %s at %s: %s %s %s%s\n", c.Effect, clean(c.Source), clean(c.EventID),
			stamp(c.At), clean(string(c.State)), clean(c.ResourceID), clean(c.Reason), marks)
	}

	if len(r.Attempts) == 0 {
		fmt.Fprintln(w, "attempts: none")
		return
	}
	fmt.Fprintln(w, "attempts:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// RESENT, REFUSED and REPLAYED are what decide whether an attempt may
	// have executed (journal.Attempt.MaybeExecuted) and how many times: a
	// reviewer judging a "maybe twice" or "key in use" flag reads them.
	fmt.Fprintln(tw, "  #\tKIND\tSTART\tWROTE\tRESENT\tSTATUS\tREFUSED\tREPLAYED\tERROR\tRETRY-AFTER\tDURATION")
	for _, a := range r.Attempts {
		status, errText, retry, dur := "-", clean(httpsyntax.RedactURLsIn(a.Err, r.URL, r.QueryURL)), "-", "-"
		resent, refused, replayed := yesNo(a.Resent), yesNo(a.Refused), yesNo(a.Replayed)
		switch {
		case !a.Done:
			// No answer recorded: nothing said whether it was refused,
			// nor (net/http's count is recorded with the outcome)
			// whether it went twice.
			status, errText, resent, refused, replayed = "?", "no outcome recorded (maybe sent)", "-", "-", "-"
		case a.Status != 0:
			status = strconv.Itoa(a.Status)
		}
		if a.RetryAfter > 0 {
			retry = a.RetryAfter.String()
		}
		if a.Done {
			dur = a.Duration.String()
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.Number, clean(string(a.Kind)), stamp(a.Start), yesNo(a.Wrote), resent,
			status, refused, replayed, errText, retry, dur)
	}
	_ = tw.Flush()
}

// yesNo is a mark's cell in show's attempt table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
