package idem

import (
	"sync"
	"time"
)

// maxWallFrames bounds the offsets wallSteps remembers: a clock is
// stepped a few times in a process's life, and one stepped on every
// reading must not grow the list for ever.
const maxWallFrames = 8

// wallSteps is what this process has seen of its wall clock's steps, so
// that it ages its own sends by the time that has passed rather than by
// the wall clock: a service started at boot minutes off, before chrony's
// makestep or ntpd -g put its clock right, or a VM resumed, finds a send
// made before the step minutes older (stepped forward) or younger
// (stepped back) than it is. Each frame is the wall clock's offset from
// the monotonic one (time.Now's monotonic reading; a monotonicClock's
// Monotonic) since born, from the reading that first showed it; a send's
// wall reading places it among the frames (wallView.offsets). The clock
// is read for it only off the first send's path: where the result lag or
// a resend's key window is judged, on Run's passes, and by prunes. Safe
// for concurrent use.
type wallSteps struct {
	mu     sync.Mutex
	frames [maxWallFrames]wallFrame
	n      int
	// dropped tells whether frames were dropped to make room; lo and hi
	// are then the lowest and highest offsets they had.
	dropped bool
	lo, hi  time.Duration
	// lived is the latest time lived observed: a reading taken before it
	// (by a caller that read the clock, then waited for the lock) starts
	// no frame, which would place frames out of their order.
	lived time.Duration
}

// wallFrame is an offset of the wall clock, first seen at wall.
type wallFrame struct {
	wall time.Time
	off  time.Duration
}

// wallView is wallSteps as one reading of the clock finds it: its frames
// and the offset then. The zero value has seen no step.
type wallView struct {
	frames  [maxWallFrames]wallFrame
	n       int
	dropped bool
	lo, hi  time.Duration
	now     time.Duration
}

// observe records the offset the clock shows when its wall reading is now
// and it has lived lived since born (at wall reading born), a new frame if
// it differs from the last by more than a slewing clock drifts, and
// returns the view of the steps then.
func (s *wallSteps) observe(now, born time.Time, lived time.Duration) wallView {
	now = now.Round(0)
	off := now.Sub(born) - lived
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		s.frames[0], s.n = wallFrame{born, 0}, 1
	}
	if d := off - s.frames[s.n-1].off; lived >= s.lived && (d > clockSlack || d < -clockSlack) {
		if s.n == maxWallFrames {
			if off0 := s.frames[0].off; s.dropped {
				s.lo, s.hi = min(s.lo, off0), max(s.hi, off0)
			} else {
				s.lo, s.hi, s.dropped = off0, off0, true
			}
			copy(s.frames[:], s.frames[1:])
			s.n--
		}
		s.frames[s.n] = wallFrame{now, off}
		s.n++
	}
	s.lived = max(s.lived, lived)
	return wallView{frames: s.frames, n: s.n, dropped: s.dropped, lo: s.lo, hi: s.hi, now: off}
}

// offsets are the lowest and highest offsets of the frames a send whose
// wall reading is at may have been made in. A frame's offset o holds from
// a step after the reading before the one that first showed it to a step
// before the next one's: a send in it reads past the previous frame's
// first reading plus o less that frame's offset (past born's reading, in
// born's frame), and short of the next's plus o less the next's offset
// (a clockSlack wider either way, for a slewing clock's drift). Only a
// frame no reading showed (two steps between readings) could hold a send
// outside these. Frames dropped for room count for a send that may
// precede the first kept; a reading no frame takes (one in the future)
// counts every frame.
func (v *wallView) offsets(at time.Time) (lo, hi time.Duration) {
	found := false
	take := func(o time.Duration) {
		if !found {
			lo, hi, found = o, o, true
			return
		}
		lo, hi = min(lo, o), max(hi, o)
	}
	for i, f := range v.frames[:v.n] {
		switch {
		case i == 0 && !v.dropped && at.Before(f.wall.Add(-clockSlack)):
			continue // before born, in born's frame
		case i > 0 && !at.After(v.frames[i-1].wall.Add(f.off-v.frames[i-1].off-clockSlack)):
			continue
		case i+1 < v.n && !at.Before(v.frames[i+1].wall.Add(f.off-v.frames[i+1].off+clockSlack)):
			continue
		}
		take(f.off)
	}
	if v.dropped && v.n > 0 && at.Before(v.frames[0].wall.Add(v.hi-v.frames[0].off+clockSlack)) {
		take(v.lo)
		take(v.hi)
	}
	if !found {
		for _, f := range v.frames[:v.n] {
			take(f.off)
		}
		if v.dropped {
			take(v.lo)
			take(v.hi)
		}
	}
	return lo, hi
}

// stepped reports whether the view shows a step since born. One of a
// Clock whose readings carry no monotonic reading never does.
func (v *wallView) stepped() bool { return v.n > 1 || v.dropped }

// stepSince is how far, net, the wall clock has been stepped forward
// since a send it read at, at the least: a send aged by the wall clock
// looks that much older than it is.
func (v *wallView) stepSince(at time.Time) time.Duration {
	lo, _ := v.offsets(at)
	return max(v.now-lo, 0)
}

// stepAhead is how far, net, the wall clock, reading now, reads ahead of
// the frame furthest behind it among those that ended less than within
// ago, at the most: a time this process journaled in such a frame (a
// clock behind at boot, put right since) looks that much older than it
// is. A frame ended when the next one's first reading was taken; what
// was journaled in it is older than that reading, on the clock as it
// reads now, and one that ended within ago or more holds only what is
// older than within, whatever the step (a board booted at 1970, put right
// by NTP, does not set back its cut-offs by fifty years for good).
// Frames dropped for room ended by the first kept one's first reading.
func (v *wallView) stepAhead(now time.Time, within time.Duration) time.Duration {
	// ended reports whether the frame before f ended within ago or more:
	// f's first reading, on the clock as it reads now, that long before
	// now, and a slewing clock's drift more.
	ended := func(f wallFrame) bool {
		return now.Sub(f.wall.Add(v.now-f.off)) >= addSat(within, clockSlack)
	}
	var ahead time.Duration
	for i, f := range v.frames[:v.n] {
		if i+1 < v.n && ended(v.frames[i+1]) {
			continue
		}
		ahead = max(ahead, v.now-f.off)
	}
	if v.dropped && v.n > 0 && !ended(v.frames[0]) {
		ahead = max(ahead, v.now-v.lo)
	}
	return ahead
}

// stepBackSince is how far, net, the wall clock has been stepped back
// since a send it read at, at the most: a send aged by the wall clock
// looks that much younger than it is.
func (v *wallView) stepBackSince(at time.Time) time.Duration {
	_, hi := v.offsets(at)
	return max(hi-v.now, 0)
}
