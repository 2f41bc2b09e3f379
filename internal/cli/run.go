package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// defaultLockTimeout is shorter than journal.DefaultLockTimeout: an
// operator at a terminal wants to hear quickly that the application is
// still running.
const defaultLockTimeout = time.Second

const usageText = `Usage: idem [-journal PATH] [-url URL] [-lock-timeout DURATION] [-allow-network-fs] [-allow-http] COMMAND [flags] [args]

idem inspects and settles the operations in an idem journal. Use it while
the application that owns the journal is stopped: the running application
holds the journal's lock. list, show, stats and key-ignoring list never
change the file.

Commands:
  list      list operations, oldest first (table or -json)
  show      print one operation in full, with its attempt timeline
  resolve   settle an operation by hand (recorded as a manual resolution)
  prune     delete succeeded and failed operations settled long ago
  stats     count operations by state
  check     verify the journal's pages and indexes (read-only; -json)
  compact   give pruned pages back to the file system (atomic swap; -json)
  key-ignoring
            list the endpoints journaled as ignoring the idempotency key,
            or remove one learnt wrongly (key-ignoring remove "METHOD URL")

Global flags (also accepted after the command):
  -journal PATH
        the journal file (default $IDEM_JOURNAL)
  -lock-timeout DURATION
        how long to wait for the journal's lock (default 1s)
  -allow-network-fs
        let resolve, prune, compact and key-ignoring remove write a
        journal on a network file system (NFS, SMB, ...), as the
        application does with journal.AllowNetworkFileSystem
  -url URL
        a running service's admin handler (package admin), instead of a
        journal: list, show, stats, resolve and key-ignoring work on the
        live service, with the same output; $IDEM_AUTHORIZATION, if set,
        is sent as the Authorization header, over https or to this
        machine only
  -allow-http
        send $IDEM_AUTHORIZATION, or the -url's user:password, over a
        plain http:// -url to another host (a network that encrypts the
        hop itself, such as a service mesh's mutual TLS)

Durations are Go durations (90m, 720h) or whole days (30d).
Run 'idem COMMAND -h' for the flags of a command.
`

// command is one subcommand.
type command struct {
	name     string
	synopsis string // the flags and arguments, after "idem NAME "
	summary  string
	run      func(e *env, args []string) error
}

var commands = []*command{
	{"list", "[-state S[,S]] [-open] [-review] [-older-than D] [-scope S] [-limit N] [-json]",
		"List operations, oldest first. With no flag, every operation in the journal.\n" +
			"REASON is why an operation is flagged for review, or why it failed, cut to " + strconv.Itoa(reasonWidth) + " characters\n" +
			"(show prints it whole).", cmdList},
	{"show", "[-scope S] [-json] KEY",
		"Print one operation in full: request, state, result, manual resolution and attempts.", cmdShow},
	{"resolve", "[-scope S] KEY -succeeded|-failed -reason TEXT [-resource-id ID] [-by NAME] [-force]",
		"Settle an operation by hand. The journal records who, why, when and the state it replaced.\n" +
			"On a journal file or with -dsn no WithSettleFunc hears of it (the application learns by Lookup);\n" +
			"with -url the running service's settle func does.", cmdResolve},
	{"prune", "-settled-before D [-dry-run]",
		"Delete succeeded and failed operations settled more than D ago. Open operations are never pruned.", cmdPrune},
	{"stats", "[-json]",
		"Count operations by state.", cmdStats},
	{"check", "[-json]", checkHelp, cmdCheck},
	{"compact", "[-json]", compactHelp, cmdCompact},
	{"key-ignoring", "[list] [-json] | remove [-json] ENDPOINT", keyIgnoringHelp, cmdKeyIgnoring},
}

// env is what a command runs with: output, the process environment, the
// clock and the global flags.
type env struct {
	ctx    context.Context
	stdout *output // keeps its first write error (printed)
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time

	journal     string        // -journal
	lockTimeout time.Duration // -lock-timeout
	networkFS   bool          // -allow-network-fs
	url         string        // -url: a running service's admin handler (remote.go)
	allowHTTP   bool          // -allow-http
	modes       []Mode        // other ways to the operations (Run)

	cmd *command // the command being run
}

// run runs the idem command with args (without the program name) and
// returns the process's exit status.
func run(args []string, stdout, stderr io.Writer, modes ...Mode) int {
	e := &env{
		modes:       modes,
		ctx:         context.Background(),
		stdout:      &output{w: stdout},
		stderr:      stderr,
		getenv:      os.Getenv,
		now:         time.Now,
		lockTimeout: defaultLockTimeout,
	}
	return e.main(args)
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct {
	cmd string // the subcommand, or "" for idem itself
	msg string
}

func (u *usageError) Error() string { return u.msg }

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// errHelp means usage was asked for and printed: exit status 0, unless
// stdout failed (printed).
var errHelp = errors.New("help requested")

func (e *env) main(args []string) int {
	fs := flag.NewFlagSet("idem", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.globalFlags(fs)
	err := fs.Parse(args)
	if err == nil {
		err = e.emptyWhere(fs, "")
	}
	if err == nil {
		err = e.dispatch(fs.Args())
	} else if errors.Is(err, flag.ErrHelp) {
		e.usage()
		err = errHelp
	} else {
		err = &usageError{msg: err.Error()}
	}
	var (
		ue *usageError
		up *unprintedError
	)
	// A command's output, or the usage asked for, lost to a failed
	// stdout is no success, whichever printed it.
	if e.stdout.err != nil && !errors.As(err, &up) && (err == nil || errors.Is(err, errHelp) || errors.Is(err, e.stdout.err)) {
		err = e.printed("")
	}
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &up) && up.done == "" && errors.Is(up.err, syscall.EPIPE):
		// The reader of a pipe went away (idem list | head -1): its
		// going is the pipeline's doing, and nothing the command did is
		// lost with the output. Exit non-zero quietly, as Go's runtime
		// does by SIGPIPE for the real stdout.
		return 1
	case errors.As(err, &ue):
		if ue.cmd == "" {
			fmt.Fprintf(e.stderr, "idem: %s\nRun 'idem -h' for usage.\n", ue.msg)
		} else {
			fmt.Fprintf(e.stderr, "idem %s: %s\nRun 'idem %s -h' for usage.\n", ue.cmd, ue.msg, ue.cmd)
		}
		return 2
	default:
		// The running service's Client words its errors "idem: ...", and
		// the admin handler and -dsn's store pass them on as they are.
		fmt.Fprintf(e.stderr, "idem: %s\n", strings.TrimPrefix(err.Error(), "idem: "))
		return 1
	}
}

func (e *env) dispatch(args []string) error {
	if len(args) == 0 {
		return usagef("", "no command given")
	}
	name, args := args[0], args[1:]
	if name == "help" {
		if len(args) == 0 {
			e.usage()
			return nil
		}
		name, args = args[0], []string{"-h"}
	}
	for _, c := range commands {
		if c.name == name {
			e.cmd = c
			return c.run(e, args)
		}
	}
	return usagef("", "unknown command %q", name)
}

// output is the command's stdout, keeping the first write error: a
// command prints in many writes and checks none of them.
type output struct {
	w   io.Writer
	err error
}

func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
	}
	return n, err
}

// printed returns, once a command has printed, an error if its stdout
// failed (a full disk, a reader gone): an answer lost is not a success
// (exit status 1). done, if not empty, says what the command did all the
// same, which the error carries to stderr: the output may have been the
// operator's one record of it (prune's count, resolve's confirmation).
func (e *env) printed(done string) error {
	if e.stdout.err == nil {
		return nil
	}
	return &unprintedError{done: done, err: e.stdout.err}
}

// unprintedError is printed's error.
type unprintedError struct {
	done string
	err  error
}

func (u *unprintedError) Error() string {
	if u.done == "" {
		return "printing the output failed: " + u.err.Error()
	}
	return u.done + ", but printing it failed: " + u.err.Error()
}

func (u *unprintedError) Unwrap() error { return u.err }

func (e *env) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.journal, "journal", e.journal, "the journal file's `path` (default $IDEM_JOURNAL)")
	fs.DurationVar(&e.lockTimeout, "lock-timeout", e.lockTimeout, "how long to wait for the journal's lock")
	fs.BoolVar(&e.networkFS, "allow-network-fs", e.networkFS, "let resolve, prune, compact and key-ignoring remove write a journal on a network file system (NFS, SMB, ...)")
	fs.StringVar(&e.url, "url", e.url, "a running service's admin handler, such as http://127.0.0.1:8081/idem/ (list, show, stats, resolve, key-ignoring)")
	fs.BoolVar(&e.allowHTTP, "allow-http", e.allowHTTP, "send $IDEM_AUTHORIZATION, or the -url's user:password, over a plain http:// -url to another host (a service mesh that encrypts the hop)")
	for _, m := range e.modes {
		m.Flags(fs)
	}
}

// usage prints idem's usage, with the modes' global flags.
func (e *env) usage() {
	text := usageText
	if len(e.modes) > 0 {
		var extra strings.Builder
		for _, m := range e.modes {
			extra.WriteString(m.Usage)
		}
		i := strings.Index(text, "\nDurations are")
		text = text[:i] + extra.String() + text[i:]
	}
	fmt.Fprint(e.stdout, text)
}

// flags returns the FlagSet for c, with the global flags registered.
func (e *env) flags(c string) *flag.FlagSet {
	fs := flag.NewFlagSet("idem "+c, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.globalFlags(fs)
	return fs
}

// cmdOf is the command fs parses for, as usage messages name it ("show").
func cmdOf(fs *flag.FlagSet) string {
	return strings.TrimPrefix(fs.Name(), "idem ")
}

// parse parses args with fs, allowing flags after positional arguments
// (idem resolve KEY -succeeded …); "--" ends the flags. It returns the
// positional arguments.
func (e *env) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	name := cmdOf(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				e.commandUsage(name, fs)
				return nil, errHelp
			}
			return nil, usagef(name, "%v", err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); len(rest) > 0 && n > 0 && args[n-1] == "--" {
			pos, rest = append(pos, rest...), nil
		}
		if len(rest) == 0 {
			if err := e.emptyWhere(fs, name); err != nil {
				return nil, err
			}
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// emptyWhere refuses a flag that says where the operations are (-journal,
// -url, a mode's -dsn) given empty, as an unset variable gives it
// (-journal "$JOURNAL"): read as the flag left out, it would reach
// $IDEM_JOURNAL's journal instead, whose operation of the same scope and
// key is not the one the operator meant.
func (e *env) emptyWhere(fs *flag.FlagSet, cmd string) error {
	where := []string{"journal", "url"}
	for _, m := range e.modes {
		where = append(where, strings.TrimPrefix(m.Name, "-"))
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && f.Value.String() == "" && slices.Contains(where, f.Name) {
			err = usagef(cmd, "empty -%s: give it a value, or leave it out (an unset variable?)", f.Name)
		}
	})
	return err
}

func (e *env) commandUsage(name string, fs *flag.FlagSet) {
	if c := e.cmd; c != nil {
		fmt.Fprintf(e.stdout, "Usage: idem %s %s\n\n%s\n\nFlags:\n", c.name, c.synopsis, c.summary)
	}
	fs.SetOutput(e.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// path returns the journal's path from -journal or $IDEM_JOURNAL.
func (e *env) path(cmd string) (string, error) {
	if e.journal != "" {
		return e.journal, nil
	}
	if p := e.getenv("IDEM_JOURNAL"); p != "" {
		return p, nil
	}
	return "", usagef(cmd, "no journal given: pass -journal PATH or set IDEM_JOURNAL")
}

// open opens the journal for cmd, read-only unless write is set. It never
// creates the file, and it turns the journal's errors into advice.
func (e *env) open(cmd string, write bool) (*journal.Store, error) {
	path, err := e.existing(cmd)
	if err != nil {
		return nil, err
	}
	opts := []journal.Option{journal.WithLockTimeout(e.lockTimeout)}
	if !write {
		// A read-only open of a journal whose log is missing shows what
		// is left and warns (journal.ErrLogMissing): the operator reading
		// a list must know that it may lack acknowledged operations.
		opts = append(opts, journal.ReadOnly(), journal.WithLogger(slog.New(warnings{e.stderr})))
	}
	if e.networkFS {
		opts = append(opts, journal.AllowNetworkFileSystem())
	}
	s, err := journal.Open(path, opts...)
	if err != nil {
		return nil, explain(path, err)
	}
	return s, nil
}

// warnings is a slog handler that prints a journal's warnings to the
// operator as "idem: warning: <message>" lines.
type warnings struct{ w io.Writer }

func (h warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnings) Handle(_ context.Context, r slog.Record) error {
	_, err := fmt.Fprintf(h.w, "idem: warning: %s\n", r.Message)
	return err
}

func (h warnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h warnings) WithGroup(string) slog.Handler      { return h }

// existing returns the journal's path after checking that a file is there.
func (e *env) existing(cmd string) (string, error) {
	path, err := e.path(cmd)
	if err != nil {
		return "", err
	}
	// journal.Open creates a missing file when opening for writing: look
	// first, so that a mistyped path is reported, not made into a journal.
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("journal %s does not exist; check -journal or IDEM_JOURNAL (idem never creates a journal)", path)
	case err != nil:
		return "", explain(path, err)
	case fi.IsDir():
		return "", fmt.Errorf("journal %s is a directory; give the path of the journal file", path)
	case fi.Size() == 0:
		return "", fmt.Errorf("journal %s is an empty file, not an idem journal; check the path", path)
	}
	return path, nil
}

// explain turns an error from the journal into a message that says what
// to do.
func explain(path string, err error) error {
	switch {
	case errors.Is(err, journal.ErrLocked):
		return fmt.Errorf("journal %s is locked by another process (probably the running application); stop it or wait, then retry", path)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("journal %s does not exist; check -journal or IDEM_JOURNAL (idem never creates a journal)", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w\nhint: run idem as the user the application runs as", err)
	case errors.Is(err, journal.ErrVersion):
		return fmt.Errorf("%w\nhint: use the idem command from the newest idem version that has run on this journal (go run github.com/idemkit/idem/cmd/idem@VERSION): "+
			"the one the application is built with or, after a rollback, the one it was rolled back from", err)
	case errors.Is(err, journal.ErrNetworkFileSystem):
		return fmt.Errorf("%w\nhint: if the application opens it with journal.AllowNetworkFileSystem and is stopped, pass -allow-network-fs", err)
	case errors.Is(err, journal.ErrLogMissing):
		return fmt.Errorf("%w\nhint: look for the segments where the file came from (the old host, the backup, the volume) and put them beside it; only if they are gone for good: idem compact -accept-lost-log", err)
	case errors.Is(err, journal.ErrCorrupt):
		return fmt.Errorf("%w\nhint: check that %s is the application's journal; if it is, keep a copy of it before anything else touches it", err, path)
	}
	return err
}

// closeStore closes s, keeping the first error.
func closeStore(s *journal.Store, err *error) {
	if cerr := s.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}

// openRecord opens the journal for cmd (read-only unless write is set) and
// reads the operation scope and key from it: the setup show and resolve
// share. On success the caller closes the store; on error it is closed.
func (e *env) openRecord(cmd, scope, key string, write bool) (*journal.Store, *journal.Record, error) {
	s, err := e.open(cmd, write)
	if err != nil {
		return nil, nil, err
	}
	r, err := get(e, s, scope, key)
	if err != nil {
		_ = s.Close() // the error from get is the one to report
		return nil, nil, err
	}
	return s, r, nil
}

// get returns the record for scope and key, or an error that tells the
// operator how to find the right one.
func get(e *env, s *journal.Store, scope, key string) (*journal.Record, error) {
	r, err := Lookup(e.ctx, s, scope, key)
	if err != nil && !errors.Is(err, ErrNoOperation) {
		return nil, explain(s.Path(), err)
	}
	return r, err
}

// Reader is the part of a journal Lookup reads.
type Reader interface {
	Get(ctx context.Context, scope, key string) (*journal.Record, error)
	List(ctx context.Context, f journal.Filter) ([]*journal.Record, error)
}

// ErrNoOperation marks Lookup's message for an unknown key.
var ErrNoOperation = errors.New("no such operation")

// Lookup returns the record for scope and key from s. For an unknown key
// it returns an error that tells the operator how to find the right one
// (and names the other scopes holding the key); s's other errors come
// back as they are.
func Lookup(ctx context.Context, s Reader, scope, key string) (*journal.Record, error) {
	r, err := s.Get(ctx, scope, key)
	if errors.Is(err, journal.ErrNotFound) {
		msg := fmt.Sprintf("no operation with key %q in scope %q; list them with `idem list`", key, scope)
		if other := otherScopes(ctx, s, scope, key); len(other) > 0 {
			msg += fmt.Sprintf(" (the key exists in scope %s: pass -scope)", strings.Join(other, ", "))
		}
		return nil, &noOperationError{msg}
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

type noOperationError struct{ msg string }

func (e *noOperationError) Error() string        { return e.msg }
func (e *noOperationError) Is(target error) bool { return target == ErrNoOperation }

// otherScopes returns the quoted scopes other than scope that hold key. It
// reads the whole journal, which only an error path can afford.
func otherScopes(ctx context.Context, s Reader, scope, key string) []string {
	all, err := s.List(ctx, journal.Filter{})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range all {
		if r.Key == key && r.Scope != scope {
			out = append(out, strconv.Quote(r.Scope))
		}
	}
	return out
}

// parseKey parses args with fs (see parse) and returns the one key they
// name, for a command that takes exactly one.
func (e *env) parseKey(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := e.parse(fs, args)
	if err != nil {
		return "", err
	}
	cmd := cmdOf(fs)
	switch {
	case len(pos) == 0:
		return "", usagef(cmd, "no key given")
	case len(pos) > 1:
		return "", usagef(cmd, "one key expected, got %d arguments: %s", len(pos), strings.Join(pos, " "))
	case pos[0] == "":
		return "", usagef(cmd, "empty key")
	}
	return pos[0], nil
}

// parseOperation is parseKey for a command that names one operation by
// scope (the flag scope is bound to) and key. An empty scope is refused
// whatever the journal's way: no journal holds one, and the admin
// handler would read it as the service's default scope, another
// operation than the one the operator meant (an unset -scope "$SCOPE").
func (e *env) parseOperation(fs *flag.FlagSet, scope *string, args []string) (string, error) {
	key, err := e.parseKey(fs, args)
	if err != nil {
		return "", err
	}
	if *scope == "" {
		return "", usagef(cmdOf(fs), "empty -scope: pass the operation's scope, or leave -scope out for %q", defaultScope)
	}
	return key, nil
}

// parseNoArgs parses args with fs (see parse), for a command that takes
// no argument: one given is an error.
func (e *env) parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(cmdOf(fs), "unexpected argument %q", pos[0])
	}
	return nil
}

// defaultScope is the idem client's default scope.
const defaultScope = idem.DefaultScope
