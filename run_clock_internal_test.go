package idem

import (
	"testing"
	"time"
)

// Run's measure of now follows the clock between its advances, and keeps
// to what it measured across them: a step of the clock, either way, shows
// as the clock reading off the measure from the next advance on; a step
// back shows at once.
func TestRunClockMeasuredNow(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var r runClock
	r.start()
	if _, ok := r.measuredNow(t0); ok {
		t.Fatal("measuredNow() before the anchor: ok; want none")
	}
	r.advance(pruneEvery, t0) // the anchor: t0
	for _, tc := range []struct {
		name    string
		advance time.Duration // measured, ending when the clock read at
		at      time.Time
		now     time.Time
		want    time.Time
	}{
		{"at the anchor", 0, t0, t0, t0},
		{"within a wait", 0, t0, t0.Add(3 * time.Second), t0.Add(3 * time.Second)},
		{"after a wait", 5 * time.Second, t0.Add(5 * time.Second), t0.Add(7 * time.Second), t0.Add(7 * time.Second)},
		{"stepped ahead, seen once the wait ends", 5 * time.Second, t0.Add(time.Hour + 10*time.Second), t0.Add(time.Hour + 11*time.Second), t0.Add(11 * time.Second)},
		{"stepped back", 5 * time.Second, t0.Add(15 * time.Second), t0.Add(-time.Hour), t0.Add(15 * time.Second)},
	} {
		r.advance(tc.advance, tc.at)
		if got, ok := r.measuredNow(tc.now); !ok || !got.Equal(tc.want) {
			t.Errorf("%s: measuredNow() = %v, %t; want %v", tc.name, got, ok, tc.want)
		}
	}
	r.stop()
	if _, ok := r.measuredNow(t0); ok {
		t.Error("measuredNow() after Run stopped: ok; want none")
	}
}
