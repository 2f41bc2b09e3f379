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
// that the result lag ages its own sends by the time that has passed
// rather than by the wall clock (resultLagging): a service started at
// boot minutes slow, before chrony's makestep or ntpd -g put its clock
// right, or a VM resumed, finds a send made before the step minutes
// older than it is. Each frame is the wall clock's offset from the
// monotonic one (time.Now's monotonic reading; a monotonicClock's
// Monotonic) since born, from the reading that first showed it: a send's
// wall reading places it in the frame in force when it was made. The
// clock is read for it only off the first send's path: where the lag is
// judged, and on Run's passes. Safe for concurrent use.
type wallSteps struct {
	mu     sync.Mutex
	frames [maxWallFrames]wallFrame
	n      int
	// floor is the lowest offset of the frames dropped to make room:
	// born's (zero) until one is.
	floor time.Duration
}

// wallFrame is an offset of the wall clock, first seen at wall.
type wallFrame struct {
	wall time.Time
	off  time.Duration
}

// wallView is wallSteps as one reading of the clock finds it: its frames
// and the offset then. The zero value has seen no step.
type wallView struct {
	frames [maxWallFrames]wallFrame
	n      int
	floor  time.Duration
	now    time.Duration
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
	if d := off - s.frames[s.n-1].off; d > clockSlack || d < -clockSlack {
		if s.n == maxWallFrames {
			s.floor = min(s.floor, s.frames[0].off)
			copy(s.frames[:], s.frames[1:])
			s.n--
		}
		s.frames[s.n] = wallFrame{now, off}
		s.n++
	}
	return wallView{frames: s.frames, n: s.n, floor: s.floor, now: off}
}

// stepSince is how far, net, the wall clock has been stepped forward
// since a send it read at: a send aged by the wall clock looks that much
// older than it is. The send is placed in the last frame first seen at or
// before at: a frame seen after it shows its reading later than at,
// whichever way the clock was stepped between; so only a second step
// back and forth between two readings could place it in a frame of a
// higher offset than its own. One no frame places (the clock was stepped
// back before it, with no reading since) takes the lowest offset seen:
// the largest step.
func (v *wallView) stepSince(at time.Time) time.Duration {
	off := v.floor
	found := false
	for i := v.n - 1; i >= 0; i-- {
		if !v.frames[i].wall.After(at) {
			off, found = v.frames[i].off, true
			break
		}
	}
	if !found {
		for _, f := range v.frames[:v.n] {
			off = min(off, f.off)
		}
	}
	return max(v.now-off, 0)
}
