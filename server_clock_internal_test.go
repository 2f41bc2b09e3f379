package idem

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What a host's answers teach of its clock: only an IMF-fixdate (the only
// form RFC 9110 5.6.7 lets a sender generate) replaces what an earlier
// answer taught; a Date of the same second keeps the earlier reading of
// ours (the server no further ahead than it was); a Date days from our
// clock is reported too (ours may be the clock days off).
func TestServerClocksLearn(t *testing.T) {
	ours := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return ours.Add(d).Format(http.TimeFormat) }
	var s serverClocks
	if _, ok := s.now("h", ours); ok {
		t.Fatal("now() with nothing learnt: ok")
	}
	s.learn("h", date(time.Hour), ours)
	s.learn("h", "", ours.Add(time.Minute))          // absent
	s.learn("h", "yesterday", ours.Add(time.Minute)) // not a date
	s.learn("h", date(time.Hour), ours.Add(500*time.Millisecond))
	if got, ok := s.now("h", ours.Add(10*time.Minute)); !ok || !got.Equal(ours.Add(70*time.Minute)) {
		t.Errorf("now() = %v, %v; want %v, true", got, ok, ours.Add(70*time.Minute))
	}
	if _, ok := s.now("other", ours); ok {
		t.Error("now() for a host never heard from: ok")
	}
	s.learn("h", "Sun, 99 Nov 1994 08:49:37 GMT", ours) // shaped, but no date
	if _, ok := s.now("h", ours); ok {
		t.Error("now() after a Date that does not parse: ok")
	}
	s.learn("h", date(72*time.Hour), ours)
	if got, ok := s.now("h", ours); !ok || !got.Equal(ours.Add(72*time.Hour)) {
		t.Errorf("now() after a Date days ahead = %v, %v; want %v, true", got, ok, ours.Add(72*time.Hour))
	}
	s.learn("h", date(-time.Hour), ours) // behind: reported, judged by the caller
	if got, ok := s.now("h", ours); !ok || !got.Equal(ours.Add(-time.Hour)) {
		t.Errorf("now() = %v, %v; want %v, true", got, ok, ours.Add(-time.Hour))
	}
	for i := range maxServerClocks + 10 {
		s.learn(fmt.Sprintf("h%d", i), date(0), ours)
	}
	if len(s.hosts) != maxServerClocks {
		t.Errorf("hosts remembered = %d; want %d", len(s.hosts), maxServerClocks)
	}
}

// Every answer goes through learn: once its host is known, it must cost
// no allocation.
func TestServerClocksLearnAllocatesNothing(t *testing.T) {
	ours := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	dates := []string{ours.Format(http.TimeFormat), ours.Add(time.Second).Format(http.TimeFormat)}
	var s serverClocks
	s.learn("api.example.com", dates[0], ours)
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		i++
		s.learn("api.example.com", dates[i%2], ours)
	}); n != 0 {
		t.Errorf("learn allocs = %v; want 0", n)
	}
}

// A host's probe: the first resend that asks sends it (a HEAD), the next
// wait for it until probed, or an answer with a Date, ends it; once over,
// no resend to the host waits or probes again; given up (unsent, or its
// drive's context ended), the next resend sends it; failed at once
// (unanswered), its waiters go and the next resend sends it; timed out,
// the host is silent (its resends wait) until the first resend an attempt
// timeout later sends it.
// An answer without a Date ends nothing (the probe's own end does). Hosts past
// maxServerClocks get none.
func TestServerClocksFirstProbe(t *testing.T) {
	ours := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	isOver := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for _, end := range []string{"probed", "a Date"} {
		t.Run(end, func(t *testing.T) {
			var s serverClocks
			if first, wait := s.firstProbe("h", ours); !first || wait != nil {
				t.Fatalf("firstProbe() = %v, %v; want the probe", first, wait)
			}
			first, wait := s.firstProbe("h", ours)
			if first || wait == nil {
				t.Fatalf("firstProbe() behind the probe = %v, %v; want a wait", first, wait)
			}
			if first, other := s.firstProbe("other", ours); !first || other != nil {
				t.Fatalf("firstProbe(other) = %v, %v; want its own probe", first, other)
			}
			s.learn("h", "", ours)
			s.probed("", true)
			if isOver(wait) {
				t.Fatal("the probe ended by an answer without a Date")
			}
			if end == "probed" {
				s.probed("h", true)
			} else {
				s.learn("h", ours.Format(http.TimeFormat), ours)
			}
			if !isOver(wait) {
				t.Fatalf("the probe did not end by %s", end)
			}
			if !s.probeDone("h", wait) {
				t.Fatal("probeDone() after the probe's end: false")
			}
			s.probed("h", true) // again: no panic
			if first, wait := s.firstProbe("h", ours); first || wait != nil {
				t.Fatalf("firstProbe() after the probe = %v, %v; want neither", first, wait)
			}
		})
	}
	// A probe given up wakes its waiters, who are told so, and the
	// next resend becomes the probe.
	var s serverClocks
	s.firstProbe("h", ours)
	_, wait := s.firstProbe("h", ours)
	s.probed("h", false)
	if !isOver(wait) || s.probeDone("h", wait) {
		t.Fatalf("after the probe gave up: woken %v, done %v; want woken, not done", isOver(wait), s.probeDone("h", wait))
	}
	if first, wait := s.firstProbe("h", ours); !first || wait != nil {
		t.Fatalf("firstProbe() after the probe gave up = %v, %v; want the probe", first, wait)
	}
	// A probe that failed at once wakes its waiters, who go (it is
	// over for them), and the next resend asks again.
	s = serverClocks{}
	s.firstProbe("h", ours)
	_, wait = s.firstProbe("h", ours)
	s.unanswered("h", time.Time{})
	if !isOver(wait) || !s.probeDone("h", wait) {
		t.Fatalf("after the probe failed at once: woken %v, done %v; want both", isOver(wait), s.probeDone("h", wait))
	}
	if until, ok, asked := s.silent("h"); ok || asked {
		t.Fatalf("silent() after the probe failed at once = %v, %v, asked %v; want neither", until, ok, asked)
	}
	if s.rootNext("h") {
		t.Fatal("rootNext() after the probe failed at once: want the path again")
	}
	if first, wait := s.firstProbe("h", ours); !first || wait != nil {
		t.Fatalf("firstProbe() after the probe failed at once = %v, %v; want the probe", first, wait)
	}
	if first, wait := s.firstProbe("h", ours); first || wait == nil {
		t.Fatalf("firstProbe() behind the probe asked again = %v, %v; want a wait", first, wait)
	}
	// A probe that timed out (a silent host) wakes its waiters, whose
	// host is silent until the first resend that asks an attempt timeout
	// later (given as from) sends it again; none before.
	s = serverClocks{}
	s.firstProbe("h", ours)
	_, wait = s.firstProbe("h", ours)
	from := ours.Add(10 * time.Second)
	s.unanswered("h", from)
	if !isOver(wait) || !s.probeDone("h", wait) {
		t.Fatalf("after the probe timed out: woken %v, done %v; want both", isOver(wait), s.probeDone("h", wait))
	}
	if first, wait := s.firstProbe("h", from.Add(-time.Nanosecond)); first || wait != nil {
		t.Fatalf("firstProbe() before the probe may go again = %v, %v; want neither", first, wait)
	}
	// Silent until the host is asked again, however late the resend
	// looks (its caller hands it off due at from or at once).
	if until, ok, asked := s.silent("h"); !ok || !until.Equal(from) || asked {
		t.Fatalf("silent() after the probe timed out = %v, %v, asked %v; want %v, true, not asked", until, ok, asked, from)
	}
	if first, wait := s.firstProbe("h", from); !first || wait != nil {
		t.Fatalf("firstProbe() once the probe may go again = %v, %v; want the probe", first, wait)
	}
	// Asked: a resend behind the probe that timed out waits for this
	// one (unasked) rather than go as if the host never was silent.
	if until, ok, asked := s.silent("h"); ok || !asked {
		t.Fatalf("silent() while the host is asked again = %v, %v, asked %v; want asked", until, ok, asked)
	}
	if !s.rootNext("h") {
		t.Fatal("rootNext() after the probe to the path timed out: want the root")
	}
	s.unanswered("h", from.Add(20*time.Second)) // the root timed out too
	if s.rootNext("h") {
		t.Fatal("rootNext() after the probe to the root timed out: want the path again")
	}
	if first, wait := s.firstProbe("h", from.Add(20*time.Second)); !first || wait != nil {
		t.Fatalf("firstProbe() once the probe may go a third time = %v, %v; want the probe", first, wait)
	}
	if first, wait := s.firstProbe("h", from); first || wait == nil {
		t.Fatalf("firstProbe() behind the probe asked again = %v, %v; want a wait", first, wait)
	}
	s.probed("h", true)
	if first, wait := s.firstProbe("h", from.Add(time.Hour)); first || wait != nil {
		t.Fatalf("firstProbe() after the probe asked again was answered = %v, %v; want neither", first, wait)
	}
	s.unanswered("unprobed", time.Time{}) // no probe: nothing to end
	if first, wait := s.firstProbe("unprobed", ours); !first || wait != nil {
		t.Fatalf("firstProbe() of a host never probed = %v, %v; want the probe", first, wait)
	}
	s = serverClocks{}
	for i := range maxServerClocks {
		s.firstProbe(fmt.Sprint("h", i), ours)
	}
	if first, wait := s.firstProbe("one more", ours); first || wait != nil {
		t.Fatalf("firstProbe() past the bound = %v, %v; want neither", first, wait)
	}
}

// A probe answer's Date, aged by the Age a cache sent with its copy (RFC
// 9111 5.1: delta-seconds; any greater than 2^31 sent as 2^31): a copy of
// unknown age teaches nothing.
func TestAgedProbeDate(t *testing.T) {
	const date = "Sun, 06 Nov 1994 08:49:37 GMT"
	for _, tc := range []struct {
		age  []string
		want string
	}{
		{nil, date},
		{[]string{"0"}, date},
		{[]string{"7200"}, "Sun, 06 Nov 1994 10:49:37 GMT"},
		{[]string{"99999999999999"}, "Fri, 24 Nov 2062 12:03:45 GMT"},
		{[]string{"-5"}, ""},
		{[]string{"+5"}, ""},
		{[]string{"1.5"}, ""},
		{[]string{""}, ""},
	} {
		require.Equalf(t, tc.want, aged(date, tc.age), "Age %q", tc.age)
	}
	require.Equal(t, "garbled", aged("garbled", []string{"60"}), "a Date that does not parse is left for learn to refuse")
}

// A host's gains since a send, as a guest VM paused twice sees them, its
// clock put right in between: the second pause gains as much as the first
// though the host reads no higher than it did then. A Date days behind
// ours (a backend that lost its time, 1970) between two answers level
// with ours lowers nothing, so no send gains the decades back; nor does
// it start the first frame, and one hours behind (a backend's clock
// behind a balancer) neither takes a gain back nor gives one. More
// frames than kept: a send in a dropped frame is judged by the lower of
// it and the first, never gaining less than it did.
func TestHostGainsSince(t *testing.T) {
	ours := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	pause := 35 * time.Minute
	var g hostGains
	at := ours
	answer := func(off time.Duration) {
		at = at.Add(time.Minute)
		g.observe(at.Add(off).Format(http.TimeFormat), at)
	}
	send := func() time.Time { at = at.Add(time.Second); return at }
	answer(0)
	first := send()
	answer(pause)
	if got := g.since(first, 0); got != pause {
		t.Errorf("gain since a send as the first pause began = %v; want %v", got, pause)
	}
	answer(0) // put right
	second := send()
	answer(pause)
	if got := g.since(second, 0); got != pause {
		t.Errorf("gain since a send as the second pause began = %v; want %v", got, pause)
	}

	// A balancer over a backend whose clock is two hours behind: its
	// answer after the pause takes none of the gain back, nor gives a
	// send before it the two hours.
	g, at = hostGains{}, ours
	answer(0)
	before := send()
	answer(-2 * time.Hour)
	answer(0)
	if got := g.since(before, 0); got != 0 {
		t.Errorf("gain since a send before an answer two hours behind = %v; want 0", got)
	}
	answer(pause)
	answer(-2 * time.Hour)
	if got := g.since(before, 0); got != pause {
		t.Errorf("gain since a send before the pause, an answer two hours behind last = %v; want %v", got, pause)
	}

	g, at = hostGains{}, ours
	epoch := time.Unix(0, 0).UTC().Format(http.TimeFormat)
	g.observe(epoch, at)
	answer(0)
	sent := send()
	g.observe(epoch, at.Add(time.Second))
	answer(0)
	if got := g.since(sent, 0); got != 0 {
		t.Errorf("gain since a send with a Date of 1970 after it = %v; want 0", got)
	}
	if got := g.since(ours, 0); got != 0 {
		t.Errorf("gain since a send before a first Date of 1970 = %v; want 0", got)
	}

	g, at = hostGains{}, ours
	answer(0)
	answer(10 * time.Second)
	answer(-30 * time.Second) // ours put right: that frame lowered below the first
	oldest := send()
	for i := range maxHostGains {
		answer(time.Duration(i+1) * 3 * time.Second)
	}
	if got, want := g.since(oldest, 0), time.Duration(maxHostGains)*3*time.Second+30*time.Second; got != want {
		t.Errorf("gain since a send in a dropped frame = %v; want %v", got, want)
	}
}

// A guest VM paused 35 minutes (virsh suspend) reads the pause behind the
// true time after the resume, and chrony slews it right at its default
// maxslewrate, 83333 ppm (chrony.conf(5) maxslewrate: 83 ms a second),
// over seven hours: the host's offset falls by clockSlack every 24
// seconds, a frame each, and the frames fill within minutes. No send
// after the resume gained anything on the host's clock (ours, slewed
// forward, calls it older than the host does), so none of those within
// the key window by our clock may read a gain that puts it past the
// window: before, the merges folded the pause into every later frame,
// and each send more than a few minutes old read 35 minutes gained. A
// send before the pause still reads the whole pause, all the way.
func TestHostGainsSlewAfterPause(t *testing.T) {
	const (
		pause  = 35 * time.Minute
		window = 27 * time.Minute // resendWindow of a 30-minute key
		slew   = 83333            // ppm
	)
	truth := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	lost := time.Duration(0)
	ours := func() time.Time { return truth.Add(-lost) }
	var g hostGains
	answer := func() { g.observe(truth.Format(http.TimeFormat), ours()) }

	answer()
	truth = truth.Add(time.Minute)
	before := ours()
	truth, lost = truth.Add(pause), pause // the guest stands still
	answer()

	var sends []time.Time
	flagged, judged := 0, 0
	for s := 1; lost > 0; s++ {
		truth = truth.Add(time.Second)
		lost = max(lost-slew*time.Microsecond, 0) // ppm of a second
		if s%5 == 0 {
			answer()
		}
		if s%30 == 0 {
			sends = append(sends, ours())
		}
		if s%60 != 0 {
			continue
		}
		now := ours()
		for _, sent := range sends {
			age := now.Sub(sent)
			if age >= window {
				continue // expired by our clock alone
			}
			judged++
			if gain := g.since(sent, 0); gain > clockSlack && age+gain >= window {
				flagged++
			}
		}
		if gain := g.since(before, 0); gain < pause-clockSlack {
			t.Fatalf("%v into the slew: gain since a send before the pause = %v; want %v", truth.Sub(before), gain, pause)
		}
	}
	if flagged != 0 {
		t.Errorf("sends after the resume read past the key window: %d of %d judgements; want 0", flagged, judged)
	}

	// Every answer goes through observe: a merge must cost no allocation.
	dates := [2]string{truth.Format(http.TimeFormat), truth.Add(10 * time.Second).Format(http.TimeFormat)}
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		i++
		g.observe(dates[i%2], ours())
	}); n != 0 {
		t.Errorf("observe allocs, merging = %v; want 0", n)
	}
}

// gainsOracle is hostGains with no bound on its frames: no merge, each
// frame the one offset its answers showed. What it reports is the gain
// since a send that hostGains must never report less of, whatever it
// merged: less, a key the server forgot during a pause would be resent,
// a second charge.
type gainsOracle struct {
	first []time.Time
	off   []time.Duration
}

func (o *gainsOracle) observe(date string, at time.Time) {
	d, err := http.ParseTime(date)
	if err != nil {
		return
	}
	at = at.Round(0)
	off := d.Sub(at)
	n := len(o.off)
	switch {
	case off < -maxServerDateSkew:
	case n == 0 || off > o.off[n-1]+clockSlack || off < o.off[n-1]-clockSlack:
		o.first, o.off = append(o.first, at), append(o.off, off)
	default:
		o.off[n-1] = max(o.off[n-1], off)
	}
}

func (o *gainsOracle) since(sent time.Time) time.Duration {
	if len(o.off) == 0 {
		return 0
	}
	i := 0
	for i+1 < len(o.off) && o.first[i+1].Before(sent) {
		i++
	}
	gain := time.Duration(0)
	for _, off := range o.off[i+1:] {
		gain = max(gain, off-o.off[i])
	}
	return gain
}

// Merging frames only ever holds back: over random lives of a host's
// clock and ours (VM pauses, a second pause mid-slew, chrony slewing
// ours right, ours stepped back or forward then paused, a balancer over
// backends seconds and hours apart alternating, a 1970 Date, a cache's
// Date minutes old), no send, before, between or at any answer, reads
// less gain from hostGains than from the unbounded frames. Ours stepped
// back puts a frame's first before an earlier one's: a merge that took
// the earlier first alone let a send there be judged by a frame after
// its own, past the pause (4m42s gained read for 17m17s).
func TestHostGainsMergeNeverLowersAGain(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 128))
	epoch := time.Unix(0, 0).UTC().Format(http.TimeFormat)
	checked := 0
	for life := range 400 {
		var g hostGains
		var o gainsOracle
		truth := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
		var behind time.Duration // how far ours reads behind the truth
		var slew time.Duration   // per second our clock gains on the truth, while behind
		var backends []time.Duration
		type send struct {
			at     time.Time
			behind time.Duration // ours behind the truth when sent
		}
		var sends []send
		step := func(d time.Duration) {
			for d > 0 {
				s := min(d, time.Second)
				truth, d = truth.Add(s), d-s
				if slew > 0 && behind > 0 {
					behind = max(behind-slew*s/time.Second, 0)
				}
			}
		}
		ours := func() time.Time { return truth.Add(-behind) }
		answer := func(skew time.Duration) {
			g.observe(truth.Add(skew).Format(http.TimeFormat), ours())
			o.observe(truth.Add(skew).Format(http.TimeFormat), ours())
		}
		for range 40 + rng.IntN(160) {
			switch r := rng.IntN(100); {
			case r < 8: // a VM pause: ours stands still
				step(0)
				behind += time.Duration(1+rng.IntN(60)) * time.Minute
			case r < 14: // chrony slews ours right at up to its maxslewrate
				slew = time.Duration(rng.IntN(83334)) * time.Microsecond
			case r < 18: // ours stepped back, or forward (NTP's step)
				behind = max(behind+time.Duration(rng.IntN(7200)-3600)*time.Second, -time.Hour)
			case r < 22: // a balancer: backends' clocks apart
				backends = nil
				for range 1 + rng.IntN(3) {
					apart := []time.Duration{0, 3 * time.Second, -3 * time.Second, time.Second, -2 * time.Hour}
					backends = append(backends, apart[rng.IntN(len(apart))])
				}
			case r < 24:
				g.observe(epoch, ours())
				o.observe(epoch, ours())
			case r < 27: // a cache's copy, minutes old, no Age
				answer(-time.Duration(rng.IntN(600)) * time.Second)
			case r < 50:
				sends = append(sends, send{ours(), behind})
				step(time.Duration(rng.IntN(3000)) * time.Millisecond)
			default:
				step(time.Duration(rng.IntN(90_000)) * time.Millisecond)
				skew := time.Duration(0)
				if len(backends) > 0 {
					skew = backends[rng.IntN(len(backends))]
				}
				answer(skew)
			}
			for _, s := range sends {
				for _, at := range []time.Time{s.at, s.at.Add(-time.Nanosecond), s.at.Add(time.Nanosecond)} {
					checked++
					if got, want := g.since(at, 0), o.since(at); got < want {
						t.Fatalf("life %d: gain since a send at %v = %v; unbounded frames say %v", life, at, got, want)
					}
				}
			}
			for i, first := range o.first {
				for _, at := range []time.Time{first, first.Add(time.Nanosecond)} {
					if got, want := g.since(at, 0), o.since(at); got < want {
						t.Fatalf("life %d: gain since a send at frame %d's first answer = %v; unbounded frames say %v", life, i, got, want)
					}
				}
			}
		}
	}
	t.Logf("%d judgements", checked)
}
