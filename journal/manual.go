package journal

import (
	"time"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/recordable"
)

// Manual is a settlement made by hand, through Store.Resolve: an operator
// who learned the outcome some other way.
type Manual struct {
	State      State     // StateSucceeded or StateFailed
	ResourceID string    // the server's id for what was created; empty keeps the recorded one
	Reason     string    // why; required
	By         string    // who resolved it
	At         time.Time // when; required (the Store never reads the clock)
	// OnlyOpen makes Resolve refuse, with an error matching ErrTerminal
	// and without writing, a record that is already succeeded or failed
	// when the resolution's transaction reads it: an operator who settles
	// what looked open never overwrites an outcome that landed meanwhile.
	// Leave it unset only to correct a settled outcome on purpose.
	OnlyOpen bool
	// unlessKeyIgnored: UnlessFlaggedKeyIgnored's; never recorded.
	unlessKeyIgnored bool
}

// UnlessFlaggedKeyIgnored returns m made, if on, to settle nothing if
// the record is open and flagged ReviewKeyIgnored when the Store applies
// it (CheckResolve: ErrFlaggedKeyIgnored), for a caller that read the
// record unflagged, as Confirmation.UnlessFlaggedKeyIgnored does and for
// the same reason: the flag, set since by another replica, may be all
// that tells a restarted process its endpoint ignores the key, and the
// resolution would clear it. The caller journals the endpoint first, as
// it does for a flag it reads, and resolves again.
func (m Manual) UnlessFlaggedKeyIgnored(on bool) Manual {
	m.unlessKeyIgnored = on
	return m
}

// CheckResolve reports whether m may settle r, the stored record as the
// Store's write reads it, in the transaction that writes the resolution:
// an error matching ErrTerminal when m is OnlyOpen and r settled, one
// matching ErrFlaggedKeyIgnored when m is UnlessFlaggedKeyIgnored and r
// open and flagged ReviewKeyIgnored, and nil when it may. Nothing must be
// written on an error. A Store that does not call it settles r whatever
// the flag, as it did before.
func CheckResolve(r *Record, m Manual) error {
	switch {
	case m.OnlyOpen && r.State.Terminal():
		return ErrTerminal
	case flaggedSinceRead(m.unlessKeyIgnored, r):
		return errorf("resolution by %q: %w", m.By, ErrFlaggedKeyIgnored)
	}
	return nil
}

// flaggedSinceRead reports whether a write made UnlessFlaggedKeyIgnored
// (unless) finds rec open and flagged ReviewKeyIgnored: the flag was set
// after its caller read rec, and the write must leave it.
func flaggedSinceRead(unless bool, rec *Record) bool {
	return unless && FlaggedKeyIgnored(rec)
}

func (m *Manual) validate() error {
	switch {
	case !m.State.Terminal():
		return errorf("manual resolution to non-terminal state %q", m.State)
	case m.Reason == "":
		return errorf("manual resolution without a reason")
	case m.At.IsZero():
		return errorf("manual resolution without a time")
	// A confirmation's bounds: every later write of the record rewrites
	// them, and every operator tool prints them.
	case len(m.ResourceID) > maxConfirmResourceID || len(m.By) > maxConfirmID || len(m.Reason) > maxConfirmReason:
		return errorf("manual resolution ResourceID longer than %d bytes, By longer than %d, or Reason longer than %d (got %d, %d and %d)",
			maxConfirmResourceID, maxConfirmID, maxConfirmReason, len(m.ResourceID), len(m.By), len(m.Reason))
	case !recordable.Name(m.ResourceID) || !recordable.Name(m.By) || !utf8.ValidString(m.Reason):
		return errorf("manual resolution ResourceID or By with a control character, or a field that is not UTF-8")
	}
	return nil
}

// resolve settles r as m says, keeping what the server last said (status
// code, body) and recording where the record stood before.
func (m *Manual) resolve(r *Record) {
	res := r.result()
	if m.ResourceID != "" {
		res.ResourceID = m.ResourceID
	}
	res.Reason = m.Reason
	r.Resolved = &Resolution{By: m.By, Reason: m.Reason, At: m.At, From: r.State}
	r.State = m.State
	r.Review = ""
	r.Settled = m.At
	r.Updated = m.At
}
