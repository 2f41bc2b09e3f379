package cli

import (
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

func cmdPrune(e *env, args []string) (err error) {
	const name = "prune"
	fs := e.flags(name)
	var before days
	fs.Var(&before, "settled-before", "delete operations settled more than `duration` ago (required; e.g. 720h or 30d)")
	dryRun := fs.Bool("dry-run", false, "count what would be deleted; change nothing")
	if err := e.parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := e.fileOnly(name); err != nil {
		return err
	}
	if !before.set {
		return usagef(name, "-settled-before is required (e.g. -settled-before 720h)")
	}
	// The journal does not know which window the application configured:
	// warn below the longest common provider window, not idem's default.
	if before.d < idem.KeyRetentionStripe {
		fmt.Fprintf(e.stderr, "idem: warning: -settled-before %s is shorter than common payment providers' key windows (%s, e.g. Stripe): a pruned key that is reused may be sent again as a new operation\n",
			before.d, idem.KeyRetentionStripe)
	}
	cutoff := e.now().Add(-before.d)

	if *dryRun {
		s, err := e.open(name, false)
		if err != nil {
			return err
		}
		defer closeStore(s, &err)
		recs, err := s.List(e.ctx, journal.Filter{States: []journal.State{journal.StateSucceeded, journal.StateFailed}})
		if err != nil {
			return explain(s.Path(), err)
		}
		n := 0
		for _, r := range recs {
			if r.Prunable(cutoff) { // as Prune judges it, a stepped clock included
				n++
			}
		}
		return printCount(e, fmt.Sprintf("would delete %d settled operations (settled before %s); dry run, nothing deleted", n, stamp(cutoff)))
	}

	s, err := e.open(name, true)
	if err != nil {
		return err
	}
	defer closeStore(s, &err)
	n, err := s.Prune(e.ctx, cutoff)
	if err != nil {
		// Prune commits in chunks: what it deleted before failing stays deleted.
		return fmt.Errorf("%w (%d operations were deleted before the error)", explain(s.Path(), err), n)
	}
	return printCount(e, fmt.Sprintf("deleted %d settled operations (settled before %s)", n, stamp(cutoff)))
}

// printCount prints prune's count, the one record a script keeps of what
// it deleted: unprinted (stdout on a full disk), it is said on stderr with
// exit status 1, not lost behind a success.
func printCount(e *env, count string) error {
	fmt.Fprintln(e.stdout, count)
	return e.printed(count)
}
