package journal

import "errors"

// Errors returned by Open. The error Open returns wraps one of them and
// names the journal's path.
var (
	// ErrLocked means another process holds the journal's file lock; Open
	// gave up after the configured wait (see WithLockTimeout).
	ErrLocked = errors.New("journal: locked by another process")
	// ErrCorrupt means the file is not an idem journal, or is damaged. It is
	// also returned by reads that meet a damaged record.
	ErrCorrupt = errors.New("journal: not an idem journal or damaged")
	// ErrVersion means the file or a record was written by a newer format
	// version than this build of idem reads.
	ErrVersion = errors.New("journal: written by a newer idem; upgrade idem to read it")
)

// Errors returned by any method once the Store is in the wrong mode.
var (
	// ErrReadOnly is returned by writes on a Store opened with ReadOnly.
	ErrReadOnly = errors.New("journal: opened read-only")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("journal: closed")
)

// Errors returned by reads and writes of one record.
var (
	// ErrNotFound means no record has that scope and key.
	ErrNotFound = errors.New("journal: record not found")
	// ErrExists means Create found a record with the same scope and key.
	ErrExists = errors.New("journal: record exists")
	// ErrTerminal means Update met a succeeded or failed record; its function
	// was not called. Only Resolve may change a terminal record.
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
var ErrMaybeCommitted = errors.New("journal: write may or may not be committed")
