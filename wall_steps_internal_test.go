package idem

import (
	"context"
	"testing"
	"time"
)

// TestWallStepsStepSince: a send is aged by the wall clock's steps since
// the frame it was made in, placed by its wall reading: forward
// (stepSince: it looks older) and back (stepBackSince: younger). A step
// seen before it, or one its reading shows it was made after, does not
// count against it; a send the readings cannot place counts the larger
// step either way; a frame dropped for room still counts.
func TestWallStepsStepSince(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	type reading struct {
		wall  time.Time
		lived time.Duration
	}
	for _, tc := range []struct {
		name     string
		seen     []reading // readings before now, after born
		now      reading
		send     time.Time
		forward  time.Duration
		backward time.Duration
	}{
		{"no step", nil, reading{t0.Add(time.Minute), time.Minute}, t0.Add(10 * time.Second), 0, 0},
		{"a slewing clock's drift", nil, reading{t0.Add(time.Minute + time.Second), time.Minute}, t0.Add(10 * time.Second), time.Second, 0},
		{"stepped forward after the send", nil, reading{t0.Add(6 * time.Minute), time.Minute}, t0.Add(10 * time.Second), 5 * time.Minute, 0},
		{"stepped forward, seen before the send", []reading{{t0.Add(5*time.Minute + 20*time.Second), 20 * time.Second}},
			reading{t0.Add(6 * time.Minute), time.Minute}, t0.Add(5*time.Minute + 30*time.Second), 0, 0},
		// Born's frame never read past t0+1m: the send was made after the step.
		{"stepped forward, unseen before the send", nil, reading{t0.Add(6 * time.Minute), time.Minute}, t0.Add(5*time.Minute + 30*time.Second), 0, 0},
		{"stepped forward after a send seen before it", []reading{{t0.Add(20 * time.Second), 20 * time.Second}},
			reading{t0.Add(6 * time.Minute), time.Minute}, t0.Add(30 * time.Second), 5 * time.Minute, 0},
		{"stepped back after the send", nil, reading{t0.Add(-4 * time.Minute), time.Minute}, t0.Add(10 * time.Second), 0, 5 * time.Minute},
		// Before born's reading: the send was made after the step.
		{"stepped back before the send, unseen", nil, reading{t0.Add(-4 * time.Minute), time.Minute}, t0.Add(-4*time.Minute - 30*time.Second), 0, 0},
		// Either side of the step by its reading: both count.
		{"stepped back, a send it cannot place", nil, reading{t0.Add(5 * time.Minute), 10 * time.Minute}, t0.Add(30 * time.Second), 0, 5 * time.Minute},
		{"stepped back, seen before the send", []reading{{t0.Add(-4*time.Minute - 40*time.Second), 20 * time.Second}},
			reading{t0.Add(-4 * time.Minute), time.Minute}, t0.Add(-4*time.Minute - 30*time.Second), 0, 0},
		{"stepped back, then forward after the send", []reading{{t0.Add(-4*time.Minute - 40*time.Second), 20 * time.Second}},
			reading{t0.Add(time.Minute), time.Minute}, t0.Add(-4*time.Minute - 30*time.Second), 5 * time.Minute, 0},
	} {
		var s wallSteps
		for _, r := range tc.seen {
			s.observe(r.wall, t0, r.lived)
		}
		v := s.observe(tc.now.wall, t0, tc.now.lived)
		if got := v.stepSince(tc.send); got != tc.forward {
			t.Errorf("%s: stepSince() = %v; want %v", tc.name, got, tc.forward)
		}
		if got := v.stepBackSince(tc.send); got != tc.backward {
			t.Errorf("%s: stepBackSince() = %v; want %v", tc.name, got, tc.backward)
		}
	}

	var s wallSteps
	for i := range 2 * maxWallFrames {
		s.observe(t0.Add(time.Duration(i)*time.Hour), t0, time.Duration(i)*(time.Hour-time.Minute)) // a minute forward each time
	}
	if s.n != maxWallFrames {
		t.Errorf("frames = %d; want %d", s.n, maxWallFrames)
	}
	v := s.observe(t0.Add(16*time.Hour), t0, 16*(time.Hour-time.Minute))
	if got, want := v.stepSince(t0.Add(10*time.Second)), 16*time.Minute; got != want {
		t.Errorf("a send in a dropped frame: stepSince() = %v; want %v", got, want)
	}
	// A reading taken before the last observed (its caller waited for
	// the lock) starts no frame: frames keep their order.
	var late wallSteps
	late.observe(t0.Add(6*time.Minute), t0, time.Minute)
	late.observe(t0.Add(30*time.Second), t0, 30*time.Second)
	if late.n != 2 {
		t.Errorf("frames after a late reading = %d; want 2", late.n)
	}
	if (&wallView{}).stepped() || !v.stepped() {
		t.Errorf("stepped(): zero wallView %t, after steps %t; want false, true", (&wallView{}).stepped(), v.stepped())
	}
	if got := (&wallView{}).stepSince(t0); got != 0 {
		t.Errorf("zero wallView: stepSince() = %v; want 0", got)
	}
	if got := (&wallView{}).stepBackSince(t0); got != 0 {
		t.Errorf("zero wallView: stepBackSince() = %v; want 0", got)
	}
}

// TestWallStepsStepAhead: a prune sets its cut-off back by how far the
// wall clock reads ahead of the frame furthest behind it, whatever the
// steps in between: a clock stepped back, then forward by as much, has
// settled operations in the frame behind; frames dropped for room count.
// Not a frame that ended the retention ago or more: all it holds is older
// than the retention by then, and a clock put right from 1970 must not
// hold back every prune until the process restarts.
func TestWallStepsStepAhead(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const day, week = 24 * time.Hour, 7 * 24 * time.Hour
	type reading struct{ wall, lived time.Duration } // from t0, from born
	for _, tc := range []struct {
		name     string
		readings []reading
		want     time.Duration
	}{
		{"no step", []reading{{time.Minute, time.Minute}, {2 * time.Minute, 2 * time.Minute}}, 0},
		{"stepped forward", []reading{{time.Minute, time.Minute}, {8*day + 2*time.Minute, 2 * time.Minute}}, 8 * day},
		{"stepped back", []reading{{time.Minute, time.Minute}, {-8*day + 2*time.Minute, 2 * time.Minute}}, 0},
		{"stepped back, then forward as much", []reading{{-8*day + time.Minute, time.Minute}, {2 * time.Minute, 2 * time.Minute}}, 8 * day},
		{"stepped forward, seen just under the retention ago", []reading{
			{time.Minute, time.Minute}, {8*day + 2*time.Minute, 2 * time.Minute}, {8*day + week + time.Minute, week + time.Minute},
		}, 8 * day},
		{"stepped forward, seen the retention ago", []reading{
			{time.Minute, time.Minute}, {8*day + 2*time.Minute, 2 * time.Minute}, {8*day + week + 3*time.Minute, week + 3*time.Minute},
		}, 0},
		{"stepped back, then forward, both seen the retention ago", []reading{
			{-8*day + time.Minute, time.Minute}, {2 * time.Minute, 2 * time.Minute}, {week + time.Hour, week + time.Hour},
		}, 0},
		{"put right from 1970, a week and a day ago", []reading{
			{time.Minute, time.Minute}, {56*365*day + 2*time.Minute, 2 * time.Minute}, {56*365*day + 8*day, 8 * day},
		}, 0},
	} {
		var s wallSteps
		var v wallView
		var now time.Time
		for _, r := range tc.readings {
			now = t0.Add(r.wall)
			v = s.observe(now, t0, r.lived)
		}
		if got := v.stepAhead(now, week); got != tc.want {
			t.Errorf("%s: stepAhead() = %v; want %v", tc.name, got, tc.want)
		}
	}

	var s wallSteps
	var v wallView
	for i := range 2 * maxWallFrames {
		v = s.observe(t0.Add(time.Duration(i)*time.Hour), t0, time.Duration(i)*(time.Hour-time.Minute)) // a minute forward each time
	}
	now := t0.Add(time.Duration(2*maxWallFrames-1) * time.Hour)
	if got, want := v.stepAhead(now, week), time.Duration(2*maxWallFrames-1)*time.Minute; got != want {
		t.Errorf("born's frame dropped: stepAhead() = %v; want %v", got, want)
	}
	// Frames 59 min apart by the time lived: those that ended 90 min ago
	// or more, and the dropped ones, hold nothing younger.
	if got, want := v.stepAhead(now, 90*time.Minute), 2*time.Minute; got != want {
		t.Errorf("within 90 min: stepAhead() = %v; want %v", got, want)
	}
	if got := (&wallView{}).stepAhead(now, week); got != 0 {
		t.Errorf("zero wallView: stepAhead() = %v; want 0", got)
	}
}

// steppableClock reads wall, and mono as its Monotonic: a test sets each
// apart, as a step moves the wall clock alone.
type steppableClock struct {
	realClock
	wall time.Time
	mono time.Duration
}

func (c *steppableClock) Now() time.Time           { return c.wall }
func (c *steppableClock) Monotonic() time.Duration { return c.mono }

// wallOnly hides a steppableClock's Monotonic.
type wallOnly struct{ c *steppableClock }

func (w *wallOnly) Now() time.Time { return w.c.Now() }
func (w *wallOnly) Sleep(ctx context.Context, d time.Duration) error {
	return w.c.Sleep(ctx, d)
}

// TestClientWallView: the Client sees a step by a monotonicClock's
// Monotonic, and by the monotonic reading time.Now's readings carry; a
// clock whose readings carry neither, or one read before the first call,
// shows none.
func TestClientWallView(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := &steppableClock{wall: t0, mono: time.Hour}
	for _, tc := range []struct {
		name  string
		clock Clock
		want  time.Duration
	}{
		{"monotonicClock", clk, 5 * time.Minute},
		{"wall readings only", &wallOnly{clk}, 0},
	} {
		clk.wall, clk.mono = t0, time.Hour
		c := &Client{}
		c.cfg.clock = tc.clock
		if v := c.wallView(t0); v.stepSince(t0) != 0 {
			t.Errorf("%s: before the first call: a step seen", tc.name)
		}
		c.born.Store(c.readBorn())
		clk.wall, clk.mono = t0.Add(6*time.Minute), clk.mono+time.Minute
		v := c.wallView(clk.wall)
		if got := v.stepSince(t0.Add(time.Second)); got != tc.want {
			t.Errorf("%s: stepSince() = %v; want %v", tc.name, got, tc.want)
		}
	}

	// time.Now's readings: lived is their difference (by their monotonic
	// readings), the offset their wall's from born's, here put 5 min
	// earlier as a clock stepped forward since would show it. (No
	// time.Time a test can make steps the wall reading alone.)
	now := time.Now()
	c := &Client{}
	c.cfg.clock = realClock{}
	c.born.Store(&bornReading{wall: now.Round(0).Add(-5 * time.Minute), read: now})
	v := c.wallView(now.Add(time.Second))
	if got := v.stepSince(now.Round(0).Add(-5 * time.Minute)); got != 5*time.Minute {
		t.Errorf("time.Now's readings: stepSince() = %v; want 5m0s", got)
	}
}
