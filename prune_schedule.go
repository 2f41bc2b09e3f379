package idem

import "time"

// pruneSchedule is when Run prunes, and how far. Pruning is the one thing
// a clock running fast makes Run do that cannot be undone: a settled
// operation pruned too early is gone, and a request resubmitted with its
// key is journaled afresh and sent, a second order if the server has
// forgotten the key. So Run does not take the clock's word for how much
// time has passed since it first pruned: it counts the time it measures
// itself, by its waits (Clock.Sleep: a timer, which stepping the clock
// does not move) and its passes, and a prune's cut-off goes no further
// than the first one plus the time measured since. The first prune waits
// until Run has run pruneEvery: a clock wrong at boot (a bad hardware
// clock) is usually put right (NTP) by then. A clock stepped
// forward while Run runs thus leaves the cut-off where the measured time
// puts it, and settled operations are kept longer by the step, until Run
// starts again. Not safe for concurrent use.
type pruneSchedule struct {
	since time.Duration // measured since the last prune (or Run's start)
	// limit is the furthest cut-off a prune may use: the first prune's,
	// moved on by every measured duration since. Zero before the first.
	limit time.Time
}

// maxPassMeasured bounds how much of one pass counts as measured time:
// a pass's length is read from the clock, which may have been stepped
// during it. Longer passes count for less (operations are kept longer).
const maxPassMeasured = 10 * time.Minute

// waited counts a wait Run slept.
func (p *pruneSchedule) waited(d time.Duration) { p.add(d) }

// ran counts a pass that began at start and ended at end, by the clock.
func (p *pruneSchedule) ran(start, end time.Time) { p.add(min(end.Sub(start), maxPassMeasured)) }

func (p *pruneSchedule) add(d time.Duration) {
	d = max(d, 0)
	p.since += d
	if !p.limit.IsZero() {
		p.limit = p.limit.Add(d)
	}
}

// due reports whether Run should prune now.
func (p *pruneSchedule) due() bool { return p.since >= pruneEvery }

// cutoff is the cut-off of a prune at now: what was settled before it is
// past retain by the clock, and by the time measured since the first
// prune.
func (p *pruneSchedule) cutoff(now time.Time, retain time.Duration) time.Time {
	// The wall reading alone: compared with the limit, a monotonic reading
	// (time.Now's) would hide the very step the limit is there for.
	c := now.Round(0).Add(-retain)
	if !p.limit.IsZero() && c.After(p.limit) {
		return p.limit
	}
	return c
}

// pruned records a prune made with cut-off c. Only the first sets the
// limit (it has to take the clock's word, hence the hour it waits); later
// ones never move it back: a clock stepped back for a while must not hold
// pruning back once it is put right.
func (p *pruneSchedule) pruned(c time.Time) {
	p.since = 0
	if p.limit.IsZero() {
		p.limit = c
	}
}
