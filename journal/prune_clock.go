package journal

import "time"

// Prunable reports whether Store.Prune, given settledBefore, deletes r: r
// is terminal, not flagged for review, and every time it journals up to
// its settlement (Created, FirstSent, each attempt's Start, Settled) lies
// before settledBefore.
//
// A terminal record is flagged only by a contradiction
// (ReviewConfirmConflict: a provider's event, or the server's late
// answer, says otherwise than the journal), which waits for a person
// however old it is: a customer charged while the journal says failed.
// Resolve clears the flag and sets Settled, so retention starts again.
//
// Settled alone is no measure of when r settled if the clock was stepped
// back before r settled: it then lies days before the sends that led to
// it, and r would be pruned while the server still keeps its key, or
// while the retention promised a resubmission would find it, so that a
// request resubmitted with its key would be sent again. The latest of its
// times is the closest to when it really settled. A time in the future
// (the clock ran fast) keeps r until the clock has passed it: as with the
// key window, its age cannot be measured before then.
func (r *Record) Prunable(settledBefore time.Time) bool {
	return r.State.Terminal() && r.Review == "" && timeKey(lastEvent(r)) < timeKey(settledBefore)
}

// RetainFrom is the time a settled record's retention counts from, which
// Prune compares with its cut-off: the latest of the times it journals up
// to its settlement (see Prunable). Stores other than this package's
// (pgjournal) index it in place of Settled.
func (r *Record) RetainFrom() time.Time { return lastEvent(r) }

// lastEvent is the latest of the times r journals up to its settlement.
// Later writes (a confirmation, Updated) are left out: they do not
// settle it again.
func lastEvent(r *Record) time.Time {
	last := r.Settled
	for _, t := range []time.Time{r.Created, r.FirstSent} {
		if t.After(last) {
			last = t
		}
	}
	for _, a := range r.Attempts {
		if a.Start.After(last) {
			last = a.Start
		}
	}
	return last
}
