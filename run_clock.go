package idem

import (
	"sync"
	"time"
)

// runClock is the time Run has measured itself, by its waits (Clock.Sleep:
// a timer, which stepping the clock does not move) and its passes. Run
// takes the clock's word for the time only until it has run an hour
// (pruneEvery: long enough for NTP to put right a clock that was wrong at
// boot); then it takes the clock's reading as its anchor, and from then
// on never believes the clock further ahead than the anchor plus the time
// measured since (trusted).
//
// Run judges with it the two things a clock running fast would make it do
// for good: prune a settled operation (it is gone, and a request
// resubmitted with its key is journaled afresh and sent, a second order if
// the server has forgotten the key), and flag an open one past the
// reconciliation deadline (automatic reconciliation never sends it again:
// an order never sent stays unsent until a person acts). Drives judge
// the key window by it too, while Run runs: a clock behind it (stepped
// back) must not make a forgotten key look fresh and resendable, and one
// ahead of it must not make a fresh key look expired for good (see
// driver.resendBlock). Before the
// anchor, Run prunes with a cut-off set back by a second retention
// (pruneCutoff) rather than not at all. After a clock is
// stepped forward both wait longer, by the step, until Run starts again;
// a clock stepped back holds them back only while the step lasts, unless
// it was still wrong when Run took its anchor (then, too, until Run
// starts again).
//
// Safe for concurrent use: Run's visits read it while Run moves it on.
type runClock struct {
	mu     sync.Mutex
	total  time.Duration // measured since Run started
	anchor time.Time     // the clock's wall reading once total reached pruneEvery; zero before
	since  time.Duration // measured since the anchor
	last   time.Time     // the clock's wall reading at the last advance
}

// maxPassMeasured bounds how much of one pass counts as measured time: a
// pass's length is read from the clock, which may have been stepped during
// it. Longer passes count for less (Run then waits a little longer).
const maxPassMeasured = 10 * time.Minute

// start forgets what an earlier Run measured.
func (r *runClock) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total, r.anchor, r.since, r.last = 0, time.Time{}, 0, time.Time{}
}

// stop forgets what Run measured, as Run returns: its measure no longer
// moves, and soon lags the time, so nothing may judge by it.
func (r *runClock) stop() { r.start() }

// measuredNow is the time by Run's measure when the clock reads now, once
// Run has taken its anchor: the anchor plus the time measured since, plus
// what the clock says has passed since the last advance (Run's wait or
// pass under way, not measured yet; none if the clock went back). So
// only a step in the segment under way goes unseen, until it ends.
func (r *runClock) measuredNow(now time.Time) (time.Time, bool) {
	now = now.Round(0)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.anchor.IsZero() {
		return time.Time{}, false
	}
	return r.anchor.Add(r.since).Add(max(now.Sub(r.last), 0)), true
}

// advance counts d, measured by Run, which ended when the clock read now.
func (r *runClock) advance(d time.Duration, now time.Time) {
	d = max(d, 0)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total += d
	r.last = now.Round(0)
	switch {
	case !r.anchor.IsZero():
		r.since += d
	case r.total >= pruneEvery:
		// The wall reading alone: compared with a later one, a monotonic
		// reading (time.Now's) would hide the very step this is for.
		r.anchor = now.Round(0)
	}
}

// trusted is the time now, as the clock reads it, unless that lies
// further on from the anchor than the time measured since: then the
// anchor plus that time. Wall readings only.
func (r *runClock) trusted(now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trustedLocked(now.Round(0))
}

// trustedLocked is trusted, r.mu held and now a wall reading.
func (r *runClock) trustedLocked(now time.Time) time.Time {
	if r.anchor.IsZero() {
		return now
	}
	if lim := r.anchor.Add(r.since); now.After(lim) {
		return lim
	}
	return now
}

// pruneCutoff is the time before which Run prunes operations settled,
// given the clock's reading now and the retention: retain before the
// trusted time once Run has taken its anchor; before that, twice retain
// before the clock's reading, so that a process that never lives an hour
// (a job, a service deployed often) still prunes, and a clock fast by less
// than the retention cannot make it prune early.
func (r *runClock) pruneCutoff(now time.Time, retain time.Duration) time.Time {
	now = now.Round(0)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.anchor.IsZero() {
		// Twice, not by -2*retain: doubling a retention past 146 years
		// (math.MaxInt64, "keep forever") overflows to a cut-off in the
		// future, which prunes every settled operation.
		return now.Add(-retain).Add(-retain)
	}
	return r.trustedLocked(now).Add(-retain)
}

// runSchedule spaces Run's hourly work (pruning, looking for operations
// scheduled too far ahead) by the time Run measured, not by the clock's
// readings, which a step moves by days either way. Not safe for
// concurrent use: Run's own.
type runSchedule struct {
	sincePrune time.Duration // since the last prune, or Run's start
	pruned     bool          // a prune has been made: the first one is at once
	sinceSweep time.Duration // since the last sweep
	swept      bool          // a sweep has been made: the first one is at once
	learnt     bool          // the endpoints that ignore the key are learnt (learnIgnoring)
}

// advance counts d, measured by Run.
func (s *runSchedule) advance(d time.Duration) {
	d = max(d, 0)
	s.sincePrune += d
	s.sinceSweep += d
}

// measure counts d, measured by Run and ended when the clock read now.
func (c *Client) measure(s *runSchedule, d time.Duration, now time.Time) {
	s.advance(d)
	c.life.run.advance(d, now)
	// A step seen here places the sends made after it in its frame
	// (wallSteps), rather than in born's, until the first lost answer
	// after it would.
	c.wallView(now)
}
