package journal

import (
	"bytes"
	"slices"
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
	// with ErrVersion.
	Newer int
}
