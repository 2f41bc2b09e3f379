package main

import (
	"fmt"

	"github.com/idemkit/idem/journal"
)

// wholeJournal parses a command that takes no flags nor arguments of its
// own and works on the journal file as a whole, and returns its path.
func (e *env) wholeJournal(name string, args []string) (string, error) {
	pos, err := e.parse(e.flags(name), args)
	if err != nil {
		return "", err
	}
	if err := noArgs(name, pos); err != nil {
		return "", err
	}
	return e.existing(name)
}

func cmdCheck(e *env, args []string) error {
	path, err := e.wholeJournal("check", args)
	if err != nil {
		return err
	}
	if err := journal.Check(path, journal.WithLockTimeout(e.lockTimeout)); err != nil {
		return explain(path, err)
	}
	fmt.Fprintf(e.stdout, "journal %s: ok (pages, records and indexes check out)\n", clean(path))
	return nil
}

func cmdCompact(e *env, args []string) error {
	path, err := e.wholeJournal("compact", args)
	if err != nil {
		return err
	}
	st, err := journal.Compact(path, journal.WithLockTimeout(e.lockTimeout))
	if err != nil {
		return explain(path, err)
	}
	fmt.Fprintf(e.stdout, "journal %s compacted: %s -> %s\n", clean(path), size(st.Before), size(st.After))
	return nil
}
