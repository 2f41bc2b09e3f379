package cli

import (
	"errors"
	"flag"
	"fmt"

	"github.com/idemkit/idem/journal"
)

// wholeJournal parses a command that takes no arguments and works on the
// journal file as a whole, and returns its path.
func (e *env) wholeJournal(fs *flag.FlagSet, args []string) (string, error) {
	name := cmdOf(fs)
	if err := e.parseNoArgs(fs, args); err != nil {
		return "", err
	}
	if err := e.fileOnly(name); err != nil {
		return "", err
	}
	return e.existing(name)
}

// checkJSON is the JSON form of check; its field names are part of idem's
// command-line interface (see checkHelp).
type checkJSON struct {
	Journal  string   `json:"journal"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	FileSize int64    `json:"file_size"`
	Pages    int64    `json:"pages"`
	Records  int      `json:"records"`
	Logged   int      `json:"logged"`
	Newer    int      `json:"newer_records"`
	// NewerKeys names the records of Newer (journal.CheckReport.NewerAt).
	NewerKeys []positionJSON `json:"newer_keys"`
}

// positionJSON is a record's scope and key.
type positionJSON struct {
	Scope string `json:"scope"`
	Key   string `json:"key"`
}

const checkHelp = `Verify the journal: bbolt's page check and the journal's own (records decode,
indexes agree). Changes nothing. Exit status 1 when the journal does not check out.

With -json, check prints one JSON object, also when the journal does not check out:
  journal    the journal's path
  ok         true when the journal checks out
  problems   each problem found, one string each; [] when ok
  file_size  the file's size in bytes
  pages      the pages in use (all of them read)
  records    the operations in the journal file, open and settled
  logged     records its log holds newer than the file (left by a process that
             stopped without closing the journal; its next start applies them)
  newer_records  records written by a newer idem (idem was rolled back): not
             damage; this build reads no more than their version
  newer_keys each of those, {"scope", "key"}, in (scope, key) order: no list
             shows them; on a journal no newer idem wrote, they are records
             whose version byte was damaged
A journal that cannot be checked at all (missing, locked) prints no JSON: the
error goes to standard error, as without -json.`

// newerNamed is how many of the records a newer idem wrote check names
// without -json: a rollback may leave thousands.
const newerNamed = 20

func cmdCheck(e *env, args []string) error {
	fs := e.flags("check")
	asJSON := fs.Bool("json", false, "print the result as a JSON object")
	path, err := e.wholeJournal(fs, args)
	if err != nil {
		return err
	}
	rep, err := journal.Inspect(path, journal.WithLockTimeout(e.lockTimeout))
	// A failed write's marker (ErrFileFailed) is read like damage: the
	// file was read whole, and what it says is a problem of the journal's.
	corrupt := errors.Is(err, journal.ErrCorrupt) || errors.Is(err, journal.ErrLogMissing) || errors.Is(err, journal.ErrFileFailed)
	if err != nil && !corrupt {
		return explain(path, err)
	}
	if *asJSON {
		out := checkJSON{Journal: path, OK: err == nil, Problems: rep.Problems,
			FileSize: rep.FileSize, Pages: rep.Pages, Records: rep.Records, Logged: rep.Logged, Newer: rep.Newer,
			NewerKeys: []positionJSON{}}
		if out.Problems == nil {
			out.Problems = []string{}
		}
		for _, p := range rep.NewerAt {
			out.NewerKeys = append(out.NewerKeys, positionJSON{Scope: p.Scope, Key: p.Key})
		}
		if werr := writeJSON(e.stdout, out); werr != nil {
			return werr
		}
	}
	if err != nil {
		return explain(path, err)
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "journal %s: ok (%d records, %d pages, %s; pages, records and indexes check out)\n",
			clean(path), rep.Records, rep.Pages, size(rep.FileSize))
		if rep.Logged > 0 {
			fmt.Fprintf(e.stdout, "  and %d records newer in its log than in the file: the application's next start applies them\n", rep.Logged)
		}
		if rep.Newer > 0 {
			fmt.Fprintf(e.stdout, "  of which %d written by a newer idem (idem was rolled back): this build reads no more than their version; "+
				"the newer idem's check reads them (on a journal no newer idem wrote: records whose version byte was damaged)\n", rep.Newer)
			// Named: no list shows them (List leaves them out).
			for i, p := range rep.NewerAt {
				if i == newerNamed {
					fmt.Fprintf(e.stdout, "    … and %d more (-json names them all)\n", len(rep.NewerAt)-i)
					break
				}
				fmt.Fprintf(e.stdout, "    %s/%s\n", clean(p.Scope), clean(p.Key))
			}
		}
	}
	return nil
}

// compactJSON is the JSON form of compact; its field names are part of
// idem's command-line interface (see compactHelp).
type compactJSON struct {
	Journal string `json:"journal"`
	Before  int64  `json:"before"`
	After   int64  `json:"after"`
	Saved   int64  `json:"saved"`
}

const compactHelp = `Rewrite the journal without the free pages that pruning leaves, check the copy,
and swap it in atomically; commits get cheaper.

With -json, compact prints one JSON object:
  journal  the journal's path
  before   the file's size in bytes before
  after    the file's size in bytes after
  saved    before minus after
On an error nothing is printed on standard output; the error says whether the
journal was replaced.

-accept-lost-log goes on when the journal file depends on log segments
(<journal>.log.<generation>) that are missing: writes the application
acknowledged into them alone are lost for good. Use it only once the segments
are known to be gone; put them back beside the file instead if they exist.`

func cmdCompact(e *env, args []string) error {
	fs := e.flags("compact")
	asJSON := fs.Bool("json", false, "print the sizes as a JSON object")
	acceptLost := fs.Bool("accept-lost-log", false, "go on without the missing log segments the journal depends on, losing the writes they held")
	path, err := e.wholeJournal(fs, args)
	if err != nil {
		return err
	}
	opts := []journal.Option{journal.WithLockTimeout(e.lockTimeout)}
	if e.networkFS {
		opts = append(opts, journal.AllowNetworkFileSystem())
	}
	if *acceptLost {
		opts = append(opts, journal.AcceptLostLog())
	}
	st, err := journal.Compact(path, opts...)
	if err != nil {
		return explain(path, err)
	}
	done := fmt.Sprintf("journal %s compacted: %s -> %s", clean(path), size(st.Before), size(st.After))
	if *asJSON {
		_ = writeJSON(e.stdout, compactJSON{Journal: path, Before: st.Before, After: st.After, Saved: st.Before - st.After}) // its error is stdout's, which printed reports
	} else {
		fmt.Fprintln(e.stdout, done)
	}
	// The swap is done: the operator must not take a lost answer for a
	// compact that failed, with the old file still in place.
	return e.printed(done + "; the compacted journal is in place")
}
