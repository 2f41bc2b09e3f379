package cli

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/idemkit/idem/journal"
)

// Backend is what list, show, stats and resolve run on when the
// operations are not read from a stopped journal file: a running
// service's admin handler (-url), or a Mode a command built on this
// package adds (the PostgreSQL journal's -dsn). Each command formats what
// a Backend returns exactly as it formats a journal file's records.
type Backend interface {
	// List returns the records f selects; olderThan and scope are f's
	// CreatedBefore and Scope as the operator gave them, for a backend
	// that filters on its side.
	List(ctx context.Context, f journal.Filter, olderThan time.Duration, scope string) ([]*journal.Record, error)
	// Get returns one record; an unknown one is an error that says so.
	Get(ctx context.Context, scope, key string) (*journal.Record, error)
	Stats(ctx context.Context) (journal.Stats, error)
	// Resolve settles the operation by hand with m (m.At is the tool's
	// clock; a backend may record its own), refusing a settled one
	// unless force. It returns the record and the state it replaced.
	Resolve(ctx context.Context, scope, key string, m journal.Manual, force bool) (*journal.Record, journal.State, error)
	// Where names the backend, without any credential: stats -json's
	// "journal".
	Where() string
	// Heading is stats' first line.
	Heading(st journal.Stats) string
	Close() error
}

// Mode is a way to reach the operations other than -journal and -url,
// with global flags of its own.
type Mode struct {
	// Name is the mode's flag as the operator types it ("-dsn"), for the
	// message of a command that needs a journal file.
	Name string
	// Flags registers the mode's global flags on fs. It is called for
	// idem's flag set and for every command's, and must bind the flags to
	// the same variables each time.
	Flags func(fs *flag.FlagSet)
	// Usage is the help text of those flags, appended to the global flags
	// in idem's usage.
	Usage string
	// Active reports whether the flags given select the mode.
	Active func() bool
	// Open returns the mode's backend for command cmd; it is called only
	// when Active. Return a UsageError for a mistake in the flags.
	Open func(ctx context.Context, cmd string) (Backend, error)
}

// UsageError returns a mistake in cmd's command line (exit status 2).
func UsageError(cmd, format string, args ...any) error { return usagef(cmd, format, args...) }

// Run runs the idem command with args (without the program name) and
// returns the process's exit status. modes are the ways to reach the
// operations besides -journal and -url.
func Run(args []string, stdout, stderr io.Writer, modes ...Mode) int {
	return run(args, stdout, stderr, modes...)
}

// backend returns the backend cmd runs on, or nil for the journal file.
func (e *env) backend(cmd string) (Backend, error) {
	if e.url != "" {
		r, err := e.remote(cmd)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	if m := e.activeMode(); m != nil {
		return m.Open(e.ctx, cmd)
	}
	return nil, nil
}

// activeMode returns the mode the flags select, or nil.
func (e *env) activeMode() *Mode {
	for i := range e.modes {
		if e.modes[i].Active() {
			return &e.modes[i]
		}
	}
	return nil
}

// fileOnly refuses to run cmd, which needs the journal file itself, in a
// mode that reaches the operations some other way.
func (e *env) fileOnly(cmd string) error {
	if e.url != "" {
		return nil // -url's behaviour is the file mode's for these commands
	}
	if m := e.activeMode(); m != nil {
		return usagef(cmd, "%s works on a bbolt journal file only (-journal mode), not with %s: pass -journal PATH", cmd, m.Name)
	}
	return nil
}

// closeBackend closes b, keeping the first error.
func closeBackend(b Backend, err *error) {
	if cerr := b.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}

// The names below are the commands' own helpers, exported for the tests
// of the commands built on this package.
var (
	// Explain turns a journal file's error into advice.
	Explain = explain
	// WriteJSON prints v as the commands print JSON.
	WriteJSON = writeJSON
	// ToJSON is a record's JSON form (list -json, show -json).
	ToJSON = toJSON
)

type (
	// RecordJSON is a record's JSON form.
	RecordJSON = recordJSON
	// CheckJSON is check -json's object.
	CheckJSON = checkJSON
	// ConfirmationJSON is a confirmation's JSON form, in RecordJSON.
	ConfirmationJSON = confirmationJSON
)

// ReasonWidth is how many characters of a reason list prints.
const ReasonWidth = reasonWidth
