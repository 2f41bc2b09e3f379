package journal

import (
	"errors"

	"github.com/idemkit/idem/internal/errtext"
)

// Errors returned by Open. The error Open returns wraps one of them and
// names the journal's path.
var (
	// ErrLocked means another Store holds the journal's file lock: one in
	// another process, or one still open in this process. Open gave up
	// after the configured wait (see WithLockTimeout); its message says
	// which of the two it was.
	ErrLocked = errors.New("journal: locked")
	// ErrCorrupt means the file is not an idem journal, or is damaged or
	// truncated. It is also returned by reads and writes that meet a
	// damaged page or record; once a write has met one, by every call
	// until the journal is closed and opened again.
	ErrCorrupt = errors.New("journal: not an idem journal or damaged")
	// ErrVersion means the file or a record was written by a newer format
	// version than this build of idem reads.
	ErrVersion = errors.New("journal: written by a newer idem; upgrade idem to read it")
	// ErrOldFormat means a read-only Open found a file in an older format
	// version, which only an Open for writing migrates (the application's
	// next start, or Compact).
	ErrOldFormat = errors.New("journal: older format; open it for writing once to migrate it")
	// ErrLogMissing means the journal file depends on log segments
	// (<journal>.log.<generation>) that are not beside it: the process
	// that wrote it stopped without closing the journal, and writes it
	// acknowledged may be in those segments alone. The message names the
	// first segment missing: the one the file depends on, or the one an
	// older segment says the log goes on in. Put the segments back, as they were, and
	// open the journal again; only if they are gone for good, open it once
	// with AcceptLostLog, knowing that those writes are lost. It does not
	// match ErrCorrupt: the file is whole, and an application that moves a
	// damaged journal aside would throw away every operation in it. A
	// read-only Open goes on, and warns (WithLogger); Check reports it.
	ErrLogMissing = errors.New("journal: log segments the journal depends on are missing")
)

// Errors returned by any method once the Store is in the wrong mode.
var (
	// ErrReadOnly is returned by writes on a Store opened with ReadOnly.
	ErrReadOnly = errors.New("journal: opened read-only")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("journal: closed")
	// ErrFileFailed is returned by every call once a commit of the file
	// failed after bbolt had written it (its fsync failed): the disk may
	// not hold what the file shows, so nothing more is read from the file
	// or written to it. Close the journal and open it again (restart the
	// process): acknowledged writes are safe in its log, and Open applies
	// them.
	//
	// It is also the error of every call once the file was removed from
	// its path, or another file put there, while the Store had it open:
	// the message says how to save the file, which holds every
	// acknowledged write, before the process stops.
	//
	// Check returns it too for a journal a write to which failed, until
	// an Open for writing has written the journal again (see ReadOnly).
	ErrFileFailed = errors.New("journal: the file failed a commit after writing it, so the disk may not hold what it shows; " +
		"nothing more is read from it or written to it until the journal is closed and opened again (acknowledged writes are safe in its log)")
)

// Errors returned by reads and writes of one record.
var (
	// ErrNotFound means no record has that scope and key.
	ErrNotFound = errors.New("journal: record not found")
	// ErrExists means Create found a record with the same scope and key.
	ErrExists = errors.New("journal: record exists")
	// ErrTerminal means Update met a succeeded or failed record; its function
	// was not called. Only Resolve may change a terminal record's outcome;
	// Confirm may record a confirmation in one and flag it for review.
	ErrTerminal = errors.New("journal: record is terminal")
	// ErrInvalid means a record, or a change to one, breaks the journal's
	// rules; nothing was written.
	ErrInvalid = errors.New("journal: invalid record")
)

// ErrMaybeCommitted is matched by the error of a write whose commit failed
// at a step after which the write may have taken effect anyway (the disk
// failed the final fsync, and a second commit meant to make it durable
// failed too). The write may be in the journal, and may be carried out
// (sent) later; it may also be gone after a restart. Treat it as
// neither done nor undone: check with Get later, and never replace the
// record with another one under a new key.
//
// Prune and Checkpoint match it when their commit of the file failed at
// its fsync: the deletions, or the copy of the log, may be on disk or
// not, and the Store refuses every call until the journal is reopened
// (see Store.Prune).
var ErrMaybeCommitted = errors.New("journal: write may or may not be committed")

// ErrKeyIgnoringFull is matched by the error of AddKeyIgnoring of an
// endpoint not recorded yet when MaxKeyIgnoringEndpoints are: nothing was
// written. The Client reads it as a failed save (idem.KeyIgnoringStore):
// the operations flagged for the endpoint stay flagged, as the only thing
// that tells the next process of it.
var ErrKeyIgnoringFull = errors.New("journal: the endpoints ignoring the key are at their bound (MaxKeyIgnoringEndpoints), so this one was not recorded; " +
	"remove those no longer called (idem key-ignoring list, then remove; Client.ForgetKeyIgnoring)")

// kindError is an error of one of the kinds above whose message says all
// there is to say: errors.Is matches the kind, but the kind's own text is
// not appended ("journal: open x: truncated …", not "…: journal: not an
// idem journal or damaged").
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string        { return e.err.Error() }
func (e *kindError) Unwrap() error        { return e.err }
func (e *kindError) Is(target error) bool { return errors.Is(e.kind, target) }

// withKind returns an error matching kind, with the message format says;
// %w in format wraps a cause as fmt.Errorf does.
func withKind(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: errorf(format, args...)}
}

// prefix starts every message of the package's errors.
const prefix = "journal: "

// errorf is fmt.Errorf for the package's messages: an error argument whose
// text already starts with "journal: " (a sentinel, or another of these
// messages) is shown without it, so that a message names the package once
// ("journal: update "k": closed", not "journal: update "k": journal:
// closed"). The chain is fmt.Errorf's: errors.Is and errors.As see every
// %w argument.
func errorf(format string, args ...any) error {
	return errtext.Errorf(prefix, format, args...)
}
