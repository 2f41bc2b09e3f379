package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem/journal"
)

func cmdList(e *env, args []string) (err error) {
	const name = "list"
	fs := e.flags(name)
	var (
		st       states
		olderArg days
	)
	fs.Var(&st, "state", "only operations in these `states` (comma-separated: pending, processing, unknown, succeeded, failed)")
	open := fs.Bool("open", false, "only open operations (pending, processing, unknown)")
	review := fs.Bool("review", false, "only operations flagged for review")
	fs.Var(&olderArg, "older-than", "only operations created more than `duration` ago")
	scope := fs.String("scope", "", "only operations in this `scope` (default every scope)")
	limit := fs.Int("limit", 0, "print at most `n` operations, the oldest (0: no limit)")
	asJSON := fs.Bool("json", false, "print a JSON array of full records")
	if err := e.parseNoArgs(fs, args); err != nil {
		return err
	}
	switch {
	case *open && len(st) > 0:
		return usagef(name, "-open and -state do not mix: -open is -state pending,processing,unknown")
	case *limit < 0:
		return usagef(name, "-limit must not be negative")
	}
	f := journal.Filter{States: []journal.State(st), Review: *review}
	if *open {
		f.States = openStates
	}
	now := e.now()
	if olderArg.set {
		f.CreatedBefore = now.Add(-olderArg.d)
	}
	// The journal lists in (scope, key) order and has no scope filter:
	// sorting by age and limiting are done here, after the scope filter.
	recs, err := e.listRecords(name, f, olderArg.d, *scope)
	if err != nil {
		return err
	}
	if *scope != "" {
		recs = slices.DeleteFunc(recs, func(r *journal.Record) bool { return r.Scope != *scope })
	}
	slices.SortStableFunc(recs, func(a, b *journal.Record) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
	})
	if *limit > 0 && len(recs) > *limit {
		recs = recs[:*limit]
	}

	if *asJSON {
		out := make([]recordJSON, len(recs))
		for i, r := range recs {
			out[i] = toJSON(r)
		}
		return writeJSON(e.stdout, out)
	}
	if len(recs) == 0 {
		fmt.Fprintln(e.stderr, "idem: no operations match")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSCOPE\tSTATE\tATTEMPTS\tAGE\tREF\tRESOURCE\tREASON")
	for _, r := range recs {
		resource := ""
		if r.Result != nil {
			resource = r.Result.ResourceID
		}
		// The reason is last: the one free-text column, it is the one a
		// long value may push past the terminal's edge.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			clean(r.Key), clean(r.Scope), clean(string(r.State)),
			strconv.Itoa(len(r.Attempts)), age(now, r.Created), clean(r.Ref), clean(resource),
			clean(truncate(reason(r), reasonWidth)))
	}
	return tw.Flush()
}

// reasonWidth is how many characters of a reason list prints; show
// prints it whole.
const reasonWidth = 60

// reason is what list's REASON column says of r: why it is flagged for
// review, or why it failed (the server's or the operator's reason).
func reason(r *journal.Record) string {
	switch {
	case r.Review != "":
		return r.Review
	case r.State == journal.StateFailed && r.Result != nil:
		return r.Result.Reason
	}
	return ""
}

// listRecords reads what f selects from the journal, or from the
// backend (the admin handler in remote mode).
func (e *env) listRecords(name string, f journal.Filter, olderThan time.Duration, scope string) (recs []*journal.Record, err error) {
	b, err := e.backend(name)
	if err != nil {
		return nil, err
	}
	if b != nil {
		defer closeBackend(b, &err)
		if recs, err = b.List(e.ctx, f, olderThan, scope); err != nil {
			return nil, err
		}
		e.notListed(b.Stats)
		return recs, nil
	}
	s, err := e.open(name, false)
	if err != nil {
		return nil, err
	}
	defer closeStore(s, &err)
	recs, err = s.List(e.ctx, f)
	if err != nil {
		return nil, explain(s.Path(), err)
	}
	e.notListed(s.Stats)
	return recs, nil
}

// notListed tells the operator, on stderr (list -json's stdout stays one
// JSON value), how many records a newer idem wrote: after a rollback the
// journal leaves them out of every list, the flagged ones included, and a
// list that hid them silently would read as "nothing else to look at".
// The count is the whole journal's, whatever list's filter: this build
// cannot read their state to filter them. Stats failing costs only the
// note, not the list the operator asked for.
func (e *env) notListed(stats func(context.Context) (journal.Stats, error)) {
	st, err := stats(e.ctx)
	if err != nil || st.Newer == 0 {
		return
	}
	fmt.Fprintf(e.stderr, "idem: %d records written by a newer idem are not listed (%d of them open; idem stats): "+
		"idem was rolled back, and only the newer idem's idem command reads them\n", st.Newer, st.NewerOpen)
}
