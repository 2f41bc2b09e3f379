package idem

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/idemkit/idem/journal"
)

// wallStepped is t, a reading of time.Now, as time.Now reads once the
// wall clock has been stepped by step: its wall reading moved, its
// monotonic reading not. No exported API makes one (Add moves both), so
// it sets the monotonic reading back through the time.Time's layout
// (wall, ext, loc; ext the monotonic reading when there is one), and
// checks that the result reads as a step would, or skips.
func wallStepped(t *testing.T, now time.Time, step time.Duration) time.Time {
	t.Helper()
	if !strings.Contains(now.String(), " m=") {
		t.Fatal("wallStepped: a reading without a monotonic reading")
	}
	s := now.Add(step)
	(*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&s)).ext -= int64(step)
	if s.Sub(now) != 0 || s.Round(0).Sub(now.Round(0)) != step {
		t.Fatal("wallStepped: time.Time's layout is not the one this helper knows: mend the helper, or this fix goes untested")
	}
	return s
}

// TestUnsteppedTimeNowReadings: with the default Clock, time.Now, a step
// forward this process saw (a board without a real-time clock booted
// eight days behind, put right by NTP since) sets back Prune's and Run's
// cut-off and Run's reconciliation deadline, as with a monotonicClock.
// It is seen by the monotonic reading time.Now's readings carry, which a
// reading stripped of it (Round(0)) no longer has: lived would then be
// read by the wall clock, step and all.
func TestUnsteppedTimeNowReadings(t *testing.T) {
	const behind = 8 * 24 * time.Hour
	bootNow := time.Now()
	c := &Client{}
	c.cfg.clock = realClock{}
	c.cfg.reconcileDeadline = DefaultReconcileDeadline
	c.born.Store(&bornReading{wall: bootNow.Round(0), read: bootNow})
	// Journaled a minute after born, while the clock ran behind.
	rec := &journal.Record{Created: bootNow.Round(0).Add(time.Minute)}

	now := wallStepped(t, bootNow.Add(2*time.Minute), behind)
	if got, want := c.unstepped(now, DefaultRetainSettled), now.Round(0).Add(-behind); !got.Equal(want) {
		t.Errorf("unstepped() = %v; want %v, the clock set back by the step", got, want)
	}
	if c.pastDeadline(rec, now) {
		t.Error("an operation journaled a minute ago, while the clock ran eight days behind, is past the 72 h reconciliation deadline: a person must act before it is sent")
	}
	// Nor does a prune's reading hide the step from the others: a send
	// made now is now, not eight days old (resultLagging would believe
	// at once a lagging result endpoint's "not found").
	if v := c.wallView(now); v.stepSince(now.Round(0)) != 0 {
		t.Errorf("a send made after the step: stepSince() = %v; want 0", v.stepSince(now.Round(0)))
	}
}
