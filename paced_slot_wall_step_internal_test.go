package idem

import (
	"testing"
	"time"
)

// TestPacedSlotKeepsItsDistanceAcrossAWallStep: a paced host's line of
// places (nextSlot) outlives the rest that set it, and time.Now's
// readings compare by their monotonic reading, which a step of the wall
// clock does not move; the journal keeps only the wall reading. After a
// step of a day, the next place must still lie within the line's
// length of the new rest's end by the wall clock: not a day in the past
// (every operation of the host due at once, and re-postponed into the
// past pass after pass) nor a day ahead (late by up to the hourly
// reschedule).
func TestPacedSlotKeepsItsDistanceAcrossAWallStep(t *testing.T) {
	const host, step = "api.example.test", 30 * time.Second
	for _, wall := range []time.Duration{24 * time.Hour, -24 * time.Hour} {
		h := newHostStalls(8)
		h.share = 8
		base := time.Now()
		until := base.Add(time.Minute)
		var last time.Time
		for range 20 { // 8 at until, 8 a step on, 4 two steps on
			last = h.nextSlot(host, until, step)
		}
		if got := last.Sub(until); got != 2*step {
			t.Fatalf("before the step, the 20th place is %v after the rest's end; want %v", got, 2*step)
		}
		now := wallStepped(t, base.Add(2*time.Second), wall)
		until2 := now.Add(time.Minute)
		got := h.nextSlot(host, until2, step).Round(0)
		if d := got.Sub(until2.Round(0)); d < 0 || d > 2*step {
			t.Errorf("wall clock stepped %v: the next place, as journaled, is %v from the new rest's end; want within [0, %v]", wall, d, 2*step)
		}
	}
}
