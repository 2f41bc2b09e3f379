package cli

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/errtext"
	"github.com/idemkit/idem/internal/recordable"
	"github.com/idemkit/idem/journal"
)

func cmdResolve(e *env, args []string) (err error) {
	const name = "resolve"
	fs := e.flags(name)
	scope := fs.String("scope", defaultScope, "the operation's `scope`")
	succeeded := fs.Bool("succeeded", false, "the server performed the operation")
	failed := fs.Bool("failed", false, "the server did not perform the operation, and never will")
	resourceID := fs.String("resource-id", "", "the server's `id` for what it created (default: the one already recorded, if any)")
	reason := fs.String("reason", "", "why, in a few words (required; recorded in the journal)")
	by := fs.String("by", "", "who resolves it (default $USER, or \"operator\")")
	force := fs.Bool("force", false, "allow changing an operation that is already succeeded or failed")
	key, err := e.parseOperation(fs, scope, args)
	if err != nil {
		return err
	}
	var m journal.Manual
	switch {
	case *succeeded && *failed:
		return usagef(name, "give one of -succeeded and -failed, not both")
	case *succeeded:
		m.State = journal.StateSucceeded
	case *failed:
		m.State = journal.StateFailed
	default:
		return usagef(name, "say how the operation ended: -succeeded or -failed")
	}
	if m.Reason = strings.TrimSpace(*reason); m.Reason == "" {
		return usagef(name, "-reason is required: say why, for whoever reads the journal next")
	}
	m.By = strings.TrimSpace(*by)
	if m.By == "" {
		m.By = cmp.Or(e.getenv("USER"), e.getenv("USERNAME"), "operator")
	}
	// Empty keeps the resource id already recorded (journal.Manual).
	m.ResourceID = *resourceID
	if err := checkManual(m); err != nil {
		return usagef(name, "%s", err)
	}

	var (
		r    *journal.Record
		from journal.State
	)
	b, err := e.backend(name)
	if err != nil {
		return err
	}
	if b != nil {
		// A backend may record the time on its own clock (the service
		// does), and refuses a settled operation without force, as below.
		defer closeBackend(b, &err)
		m.At = e.now()
		if r, from, err = b.Resolve(e.ctx, *scope, key, m, *force); err != nil {
			return err
		}
		// The service records its own time and may record another by:
		// the login its WithOperator verified, "alice (said root)".
		// Print what it recorded, not what was sent.
		if r.Resolved != nil {
			m.At, m.By, m.Reason = r.Resolved.At, r.Resolved.By, r.Resolved.Reason
		}
	} else {
		// The lock is held from here on: nothing changes r before Resolve.
		s, rec, err := e.openRecord(name, *scope, key, true)
		if err != nil {
			return err
		}
		defer closeStore(s, &err)
		if rec.State.Terminal() && !*force {
			return SettledError(rec)
		}
		// Its flag may be the endpoint's one trace: the service, started
		// again, would resend there a payment whose answer was lost.
		if err := idem.KeepKeyIgnoringBeforeResolve(e.ctx, s, rec); err != nil {
			// The command's own "idem: " comes first.
			return explain(s.Path(), errtext.Errorf("idem: ", "%w", err))
		}
		m.At = e.now()
		if r, err = s.Resolve(e.ctx, *scope, key, m); err != nil {
			return explain(s.Path(), err)
		}
		if r.Resolved != nil {
			from = r.Resolved.From
		}
	}
	resource := ""
	if r.Result != nil {
		resource = r.Result.ResourceID
	}
	done := fmt.Sprintf("resolved operation %s in scope %s: %s -> %s",
		clean(r.Key), clean(r.Scope), clean(string(from)), clean(string(r.State)))
	fmt.Fprintln(e.stdout, done)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "  ref:\t%s\n", clean(r.Ref))
	fmt.Fprintf(tw, "  resource id:\t%s\n", clean(resource))
	fmt.Fprintf(tw, "  reason:\t%s\n", clean(m.Reason))
	fmt.Fprintf(tw, "  by:\t%s\n", clean(m.By))
	fmt.Fprintf(tw, "  at:\t%s\n", stamp(m.At))
	fmt.Fprintf(tw, "  attempts:\t%d\n", len(r.Attempts))
	_ = tw.Flush() // its error is out's, which printed reports
	// The resolution is written: the operator must not take a lost
	// confirmation for a resolution that failed, and resolve again.
	return e.printed(done + "; the resolution is journaled")
}

// The bounds the Client's Resolve and the journal set on a resolution:
// every later write of the operation rewrites what is recorded here.
const (
	maxResolveID         = recordable.MaxID
	maxResolveResourceID = recordable.MaxResourceID
	maxResolveReason     = recordable.MaxReason
)

// checkManual refuses, naming the flag, what the journal would refuse.
func checkManual(m journal.Manual) error {
	for _, f := range []struct {
		flag, v string
		max     int
	}{{"-resource-id", m.ResourceID, maxResolveResourceID}, {"-by", m.By, maxResolveID}} {
		switch {
		case len(f.v) > f.max:
			return fmt.Errorf("%s is %d bytes; at most %d", f.flag, len(f.v), f.max)
		case !recordable.Name(f.v):
			return fmt.Errorf("%s %s has a control character or is not UTF-8", f.flag, strconv.Quote(f.v))
		}
	}
	switch {
	case len(m.Reason) > maxResolveReason:
		return fmt.Errorf("-reason is %d bytes; at most %d: link to longer notes", len(m.Reason), maxResolveReason)
	case !utf8.ValidString(m.Reason):
		return fmt.Errorf("-reason %s is not UTF-8", strconv.Quote(m.Reason))
	}
	return nil
}

// SettledError is resolve's refusal of an operation already succeeded or
// failed, without -force.
func SettledError(r *journal.Record) error {
	return fmt.Errorf("operation %q in scope %q is already %s (settled %s); pass -force to change a settled operation",
		r.Key, r.Scope, r.State, stamp(r.Settled))
}
