package journal

import (
	"slices"
	"time"
)

// Filter selects records for Store.List. The zero Filter selects every
// record.
type Filter struct {
	States        []State   // only records in one of these states; empty means any
	Review        bool      // only records with a review reason
	CreatedBefore time.Time // only records created before it; zero means no bound
	Limit         int       // at most this many; 0 means no limit
}

// openOnly reports whether every record f selects is open, so that List can
// read only the open records instead of the whole journal.
func (f *Filter) openOnly() bool {
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
	return !f.Review || review != ""
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
}
