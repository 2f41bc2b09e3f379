package idem

import (
	"net/http"
	"testing"
	"time"
)

// gainsLife drives a host's answers and our wall steps over one life: the
// host's clock true, ours behind it by behind (a step back of ours adds
// to it, as a VM pause does), the monotonic clock standing still in a
// pause only, as a guest's does.
type gainsLife struct {
	start, truth   time.Time
	behind, paused time.Duration
	g              hostGains
	steps          wallSteps
}

func newGainsLife() *gainsLife {
	t := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	return &gainsLife{start: t, truth: t}
}

func (l *gainsLife) ours() time.Time { return l.truth.Add(-l.behind) }

func (l *gainsLife) answer() { l.g.observe(l.truth.Format(http.TimeFormat), l.ours()) }

// back is how far ours has been stepped back since a send that read sent,
// at the most, as resendBlock reads it (wallView.stepBackSince).
func (l *gainsLife) back(sent time.Time) time.Duration {
	v := l.steps.observe(l.ours(), l.start, l.truth.Sub(l.start)-l.paused)
	return v.stepBackSince(sent)
}

// A send, then our clock stepped back 10 minutes (NTP putting right a
// clock that ran ahead), then the VM paused 20 minutes: the host's clock
// gained 30 minutes on ours since the send, of which wallSteps sees the
// 10 of the step. The frames after the step are all first shown before
// the send's reading: judged by the last of them, the send read no gain
// at all, and its key, 30 minutes older than ours says, was judged 20
// minutes short (a second order past a 30-minute key window, Fiber's
// idempotency default). Whether or not an answer came after the send
// before the step, the send reads the whole 30 minutes.
func TestHostGainsStepBackThenPause(t *testing.T) {
	for _, answeredAfter := range []bool{true, false} {
		l := newGainsLife()
		for range 5 {
			l.truth = l.truth.Add(time.Minute)
			l.answer()
		}
		l.truth = l.truth.Add(30 * time.Second)
		sent := l.ours()
		if answeredAfter {
			l.truth = l.truth.Add(30 * time.Second)
			l.answer() // the send's own 503, say
		}
		l.truth = l.truth.Add(time.Minute)
		l.behind += 10 * time.Minute // stepped back
		l.truth = l.truth.Add(time.Minute)
		l.answer()
		l.behind += 20 * time.Minute // paused: ours and the monotonic clock stand still
		l.paused += 20 * time.Minute
		l.truth = l.truth.Add(20 * time.Minute)
		l.truth = l.truth.Add(time.Minute)
		l.answer()
		back := l.back(sent)
		if back < 10*time.Minute-clockSlack {
			t.Fatalf("answered after the send %v: wallSteps' step back since it = %v; want 10m", answeredAfter, back)
		}
		if got, want := l.g.since(sent, back), 30*time.Minute; got < want-clockSlack {
			t.Errorf("answered after the send %v: gain since a send before a step back and a pause = %v; want %v", answeredAfter, got, want)
		}
	}
}

// The cost of judging a send by every frame that may hold it: a host
// whose clock stands steady, ours stepped back 10 minutes. No send, before
// or after the step, reads more gain than wallSteps already reads of the
// step back, so the host's clock flags no operation the step alone does
// not; a pause long before the step is read only by the sends before it.
func TestHostGainsStepBackSteadyHostFlagsNothingMore(t *testing.T) {
	l := newGainsLife()
	var sends []time.Time
	var beforePause int
	for s := 1; s <= 3600; s++ {
		l.truth = l.truth.Add(time.Second)
		switch s {
		case 600:
			l.behind += 5 * time.Minute // paused
			l.paused += 5 * time.Minute
			l.truth = l.truth.Add(5 * time.Minute)
			// This second's send reads what the first answer after the
			// pause reads: it may have gone before it.
			beforePause = len(sends) + 1
		case 1800:
			l.behind += 10 * time.Minute // stepped back
		}
		if s%5 == 0 {
			l.answer()
		}
		if s%30 == 0 {
			sends = append(sends, l.ours())
		}
		if s%60 == 0 {
			l.back(l.ours()) // Run's pass reads the clock
		}
	}
	for i, sent := range sends {
		back := l.back(sent)
		gain := l.g.since(sent, back)
		want := back
		if i < beforePause {
			want += 5 * time.Minute
		}
		if gain > want+clockSlack {
			t.Errorf("send %d (%v): gain %v; wallSteps reads %v stepped back, want at most %v", i, sent.Format(time.TimeOnly), gain, back, want)
		}
	}
}
