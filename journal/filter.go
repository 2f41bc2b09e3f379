package journal

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"time"
)

// Filter selects records for Store.List. The zero Filter selects every
// record; each field set narrows the selection.
type Filter struct {
	Scope         string    // only records of this scope; empty means any
	States        []State   // only records in one of these states; empty means any
	Open          bool      // only open records (pending, processing, unknown)
	Review        bool      // only records with a review reason
	CreatedBefore time.Time // only records created before it; zero means no bound
	Limit         int       // at most this many; 0 means no limit
	// After: only records after this (Scope, Key) in List's order, for
	// paging: pass the Scope and Key of the last record of the previous
	// page, and the next page costs what it returns, not the records
	// before it. It need not name a record that exists (one pruned since
	// is fine); one with a NUL byte is refused (ErrInvalid). The zero
	// Position means no bound.
	After Position
}

// Position is a place in List's (Scope, Key) order: byte order of the
// scope, then of the key.
type Position struct {
	Scope, Key string
}

// checkAfter refuses a bound no record could hold: with a NUL byte, the
// key index's byte order and (Scope, Key) order part, and PostgreSQL's
// text holds none.
func (f *Filter) checkAfter() error {
	if strings.IndexByte(f.After.Scope, 0) >= 0 || strings.IndexByte(f.After.Key, 0) >= 0 {
		return errorf("NUL byte in Filter.After: %w", ErrInvalid)
	}
	return nil
}

// matchAfter applies f.After to a record's scope and key.
func (f *Filter) matchAfter(scope, key string) bool {
	if f.After == (Position{}) {
		return true
	}
	return cmp.Or(strings.Compare(scope, f.After.Scope), strings.Compare(key, f.After.Key)) > 0
}

// openOnly reports whether every record f selects is open, so that List can
// read only the open records instead of the whole journal.
func (f *Filter) openOnly() bool {
	if f.Open {
		return true
	}
	if len(f.States) == 0 {
		return false
	}
	for _, s := range f.States {
		if s.Terminal() {
			return false
		}
	}
	return true
}

// matchState applies the parts of f that need only the state and review
// reason, which decodeState reads cheaply.
func (f *Filter) matchState(s State, review string) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, s) {
		return false
	}
	if f.Open && s.Terminal() {
		return false
	}
	return !f.Review || review != ""
}

// matchScope applies f.Scope to a record key (scope, NUL, key).
func (f *Filter) matchScope(rk []byte) bool {
	if f.Scope == "" {
		return true
	}
	return len(rk) > len(f.Scope) && rk[len(f.Scope)] == 0 && bytes.HasPrefix(rk, []byte(f.Scope))
}

func (f *Filter) matchCreated(r *Record) bool {
	return f.CreatedBefore.IsZero() || r.Created.Before(f.CreatedBefore)
}

// Stats summarises a journal, for the operator tool.
type Stats struct {
	ByState  map[State]int // records per state
	Open     int           // records that are not terminal
	Review   int           // records with a review reason
	Total    int           // all records
	FileSize int64         // size of the journal file in bytes
	// LostLogSegments counts the log segments found removed or truncated
	// under this Store since Open (a cleanup job or a log rotation that
	// matches <journal>.log.*): mended, but a sign that something will do
	// it again. WithLogger's logger hears of each.
	LostLogSegments int
	// Newer counts the records written by a newer idem, in a record
	// version this build does not read (a rollback left them): counted
	// in Total only. The scans of open records skip them, so above zero
	// an open one among them is settled by no one until that idem runs
	// on the journal again; Get, Update and Create of their keys fail
	// with ErrVersion. List leaves them all out.
	Newer int
	// NewerOpen counts those of Newer that are open: operations no one
	// settles until the newer idem runs on the journal again. Unlike
	// Newer, which the settled ones keep above zero until the upgrade
	// (Prune keeps them), it falls back to zero once the newer idem has
	// settled them, so an alert can watch it.
	NewerOpen int
}
