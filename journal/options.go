package journal

import (
	"log/slog"
	"time"
)

// DefaultLockTimeout is how long Open waits for another process to release
// the journal's file lock before it returns ErrLocked.
const DefaultLockTimeout = 2 * time.Second

// An Option configures Open.
type Option interface {
	apply(*config)
}

type config struct {
	lockTimeout time.Duration
	readOnly    bool
	noSync      bool
	mustExist   bool
	networkFS   bool // AllowNetworkFileSystem
	logger      *slog.Logger
	applyDelay  time.Duration // tests: see applyDelay
	overlayMax  int64         // tests: see overlayMax
	// inspectStep, when a test sets it, runs inside Inspect between its
	// Open and its walk of the file.
	inspectStep func()
	// failSync, when a test sets it, stands in for the fdatasync of each
	// log segment Open makes durable (syncRecovered), and of each file it
	// writes again after a failed write (rewriteAfterFailure): an error
	// fails it.
	failSync func(path string) error
	// failLogWrite, when a test sets it, is the log's failWrite from the
	// start, before Open's own writes to the log.
	failLogWrite func(header, written bool) error
	// failInit, when a test sets it, stands in for the fdatasync of
	// bbolt's first commit to a new file, in bolt.Open: an error fails
	// it once written, as a system call's error.
	failInit func() error
	// failOpenCommit, when a test sets it, stands in for the fdatasync
	// of each commit Open makes before a Store exists (openCommit): an
	// error fails it once written.
	failOpenCommit func() error
	// failCommit, when a test sets it, is the applier's failCommit from
	// the start, before the applier's first pass.
	failCommit func(written bool) error
	// failFreelist, when a test sets it, is the applier's failFreelist.
	failFreelist func() error
	// acceptLostLog: AcceptLostLog.
	acceptLostLog bool
	// fallocate, when a test sets it, stands in for fallocate(2) as Open
	// reserves a new journal's first pages (reserveNew).
	fallocate fallocateFunc
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithLockTimeout sets how long Open waits for the file lock held by
// another process before it returns an error matching ErrLocked. The
// default is DefaultLockTimeout; zero or less means a single try. Open
// never waits forever.
func WithLockTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.lockTimeout = d })
}

// ReadOnly opens the journal for inspection, as the operator tool does: the
// file is neither created nor changed, and every write returns ErrReadOnly.
// Several read-only Stores may share a file, but not with a writer: while
// the application holds the journal, a read-only Open returns ErrLocked.
// A journal a write to which failed (its fsync: the disk may not hold what
// it shows) opens with a warning (WithLogger), and Check reports it, until
// an Open for writing has written it again.
func ReadOnly() Option {
	return optionFunc(func(c *config) { c.readOnly = true })
}

// WithUnsafeNoSync turns off fsync. It is unsafe: a crash of the machine
// (not only of the process) can lose writes that were acknowledged, which
// breaks every promise the journal makes. It exists for benchmarks and
// tests only.
func WithUnsafeNoSync() Option {
	return optionFunc(func(c *config) { c.noSync = true })
}

// WithLogger gives the Store a logger for what it mends by itself but an
// operator must hear of: a log segment (<journal>.log.<n>) removed or
// truncated under it by a cleanup job or a log rotation, and a record
// written by a newer idem (a rollback left it) that Prune kept or a scan
// of open records skipped. Without it (or with nil) the Store stays
// silent, and Stats' LostLogSegments and Newer are the only trace.
// idem.Open passes the Client's WithLogger on.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// MustExist makes Open refuse to create the journal: a missing or empty
// file is an error matching fs.ErrNotExist, not a fresh journal. Use it
// once the journal exists (every start after the first). Otherwise a
// volume not mounted, or a path changed by a deploy, looks like a first
// start: Open creates an empty journal beside the real one, and every
// operation still open in the real one (an "unknown" its caller was told
// idem would settle) is never resumed.
func MustExist() Option {
	return optionFunc(func(c *config) { c.mustExist = true })
}

// AcceptLostLog makes an Open for writing go on when the journal file
// depends on log segments that are missing (ErrLogMissing): the writes
// acknowledged into them alone are lost for good (an operation journaled,
// perhaps sent, that no Resume will find), and the file records that it
// no longer depends on them. Give it once, knowingly, after the segments
// were searched for and are gone; never as a default. Without a missing
// log it changes nothing.
func AcceptLostLog() Option {
	return optionFunc(func(c *config) { c.acceptLostLog = true })
}
