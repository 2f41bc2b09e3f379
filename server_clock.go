package idem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idem/journal"
)

// serverClocks is what each host's clock reads, as the last of its answers
// that carried a Date said (RFC 9110 6.6.1: an origin server with a clock
// sends Date on every answer). It is a measure of the time that does not
// depend on ours: a process restarted on a VM restored from a snapshot,
// or booted with a wrong RTC before NTP steps it, reads a clock hours
// behind, and nothing journaled need lie in its future (a key first sent
// more than the step ago), so by it a key the server forgot long ago
// looks fresh. The server forgets keys by its own clock: resendBlock
// judges the key window by the host's too, when it reads ahead of ours.
//
// Kept in memory only, per host as the URL names it (not normalised: a
// lookup must cost no string). Learning costs a lock and a map lookup per
// answer, no allocation but a host's first entry and an answer's Age
// (aged); the Date is parsed when it changes (once a second per host at
// most, for hostGains), and when a resend is judged. A resend to a host
// none of whose answers has come back since the process started cannot
// be judged by it: the first such resend asks the host's clock with a
// HEAD (headProbe), the others wait for its answer, and all are judged
// again (driver.awaitProbe). Nor is an operation this process first sent
// (its clock's error then is not known: resendBlock). Safe for
// concurrent use; the zero value is ready.
type serverClocks struct {
	mu sync.Mutex
	// hosts holds each host's entry by pointer: an entry is 648 bytes,
	// and every answer and send updates it.
	hosts map[string]*serverDate
	// probes holds, per host that has had a probe (firstProbe), a
	// channel closed once the probe's attempt is over or an answer with
	// a Date came from the host: the resends behind the probe wait on it
	// (driver.awaitProbe).
	probes map[string]chan struct{}
	// again holds, per host whose probe got no answer (unanswered), when
	// the next resend that asks sends it again: at once after a refusal,
	// an attempt timeout after a silent host's, whose resends wait until
	// the host is asked again (silent).
	again map[string]time.Time
	// root holds the hosts whose next probe asks the host's root rather
	// than the operation's path: the last one to the path timed out
	// (rootNext).
	root map[string]bool
	// probeAsked holds, per host in probes, when a resend last asked for
	// its probe (firstProbe): the least recently asked makes room
	// (evictProbe).
	probeAsked map[string]time.Time
	// keep is how long after its last answer or send of ours a host's
	// entry is kept (evictClock): twice the longest key window a send may
	// be judged by (newClient); zero, none is kept past the bound.
	keep time.Duration
	// noEvictBefore is a reading before which no entry is old enough to
	// go (evictClock found none): hosts past the bound cost no scan per
	// answer while they wait.
	noEvictBefore time.Time
}

// serverDate is one answer's Date, as sent, and our clock's reading when
// the answer came (with its monotonic reading, if the clock gives one, so
// that a step of ours after it does not move the estimate).
type serverDate struct {
	date string
	at   time.Time
	// gains are the host's clock's offsets from ours (its Date less our
	// wall reading), each from the answer that first showed it more than
	// clockSlack ahead of the last (hostGains).
	gains hostGains
	// used is our clock's reading at the latest answer from the host or
	// send of ours to it (sending), whichever came last.
	used time.Time
}

// maxHostGains bounds the offsets a host's gains remember: a clock of
// ours loses time on the host's a few times in a process's life (a VM
// paused, a clock stepped back).
const maxHostGains = 8

// hostGains is how a host's clock has gained on ours since this process
// first heard from it, by its answers' Dates: a guest VM paused by its
// hypervisor (virsh suspend, a snapshot with memory) sees no time pass,
// its wall and monotonic clocks alike, and after the resume reads the
// pause behind the true time until NTP slews it right, hours later. No
// reading of ours shows it (wallSteps sees no step); the host's clock,
// which went on, does. Each frame's offset is the highest its answers
// showed: an answer's Date is truncated to the second and read by us
// after its latency, so an offset never reads above the true one, and
// one that rises past the frame's by more than clockSlack is the host's
// clock gaining on ours. One that falls by more than clockSlack (ours
// put right after a pause, a slow answer, a balancer over clocks apart)
// starts a frame too: without it, a second pause after the correction
// would rise to no more than the first did, and gain nothing. A Date
// more than maxServerDateSkew behind ours is a broken clock (1970), not
// ours put right: it starts no frame. Past maxHostGains frames, the
// adjacent pair whose merging rises least becomes one (merge): NTP
// slewing ours right after a pause starts a frame every few dozen
// seconds, and those fold together, the pause's jump kept between them
// and the sends before it. The zero value has heard no answer.
type hostGains struct {
	frames [maxHostGains]gainFrame
	n      int
}

// gainFrame is an offset of the host's clock from ours, first shown by an
// answer that came when our wall clock read first; top is the highest
// any frame merged into it showed (merge), off the lowest, both the one
// offset where none was; rose is the most the host's clock gained within
// it since a send in it, at the least seen (zero where none was merged).
type gainFrame struct {
	first          time.Time
	off, top, rose time.Duration
	// end is the latest reading of ours at any answer in it, merged
	// ones included: ours stepped back reads, in a later frame, what it
	// read in this one, and a send read up to end may lie in this frame
	// though a later one's first is before it (since).
	end time.Time
}

// observe records the offset an answer dated date showed, that came when
// our wall clock read at.
func (g *hostGains) observe(date string, at time.Time) {
	d, err := http.ParseTime(date)
	if err != nil {
		return
	}
	at = at.Round(0)
	off := d.Sub(at)
	switch {
	case off < -maxServerDateSkew:
	case g.n == 0:
		g.frames[0], g.n = gainFrame{first: at, off: off, top: off, end: at}, 1
	case off > g.frames[g.n-1].off+clockSlack || off < g.frames[g.n-1].off-clockSlack:
		if g.n == maxHostGains {
			g.merge()
		}
		g.frames[g.n] = gainFrame{first: at, off: off, top: off, end: at}
		g.n++
	default:
		f := &g.frames[g.n-1]
		f.off, f.top, f.end = max(f.off, off), max(f.top, off), maxTime(f.end, at)
	}
}

// merge makes room for a frame: of the adjacent pairs, the one whose
// merged frame rises least becomes one, the earlier's first, its offset
// the lower, its top the higher. A send that lay in either is judged
// from that lower offset (since), which holds back rather than lets go:
// it reads at least the gain it did. The rise is what a send in the
// earlier may read that it did not: the later's top less the earlier's
// offset. A fall merges at no cost, for the host's clock gained nothing
// on ours since a send before it, so NTP slewing ours right after a
// pause, a frame every few dozen seconds (chrony's default maxslewrate,
// 83333 ppm: 2 s in 24 s), folds into one frame while the pause's jump
// stays a boundary. Merging the first two frames instead folded the
// pause into every later one: each send since read the whole pause as
// gained, and one sent minutes after the resume, a key the server still
// held, went to a person. Of pairs rising alike, the oldest merges.
func (g *hostGains) merge() {
	best, rose := 0, time.Duration(0)
	for i := 0; i+1 < g.n; i++ {
		a, b := g.frames[i], g.frames[i+1]
		if r := max(a.rose, b.rose, b.top-a.off); i == 0 || r < rose {
			best, rose = i, r
		}
	}
	a, b := &g.frames[best], g.frames[best+1]
	a.off, a.top, a.rose = min(a.off, b.off), max(a.top, b.top), rose
	a.end = maxTime(a.end, b.end)
	copy(g.frames[best+1:], g.frames[best+2:g.n])
	g.n--
}

// since is how far the host's clock has gained on ours since a send of
// ours that read sent, at the least seen: the highest offset shown since
// less that of the frame the send lay in (the most that frame rose
// within it, if more: merge). The send may lie in any frame first shown
// before it (one shown at its reading or after may have come after the
// send, which may then lie before the gain) that ended at or after it: the
// next frame was first shown at its reading or after, or the frame itself
// showed a reading at or after it, or the next frame's first reading is
// at or before this one's last (ours stepped back between them) and the
// send read less than back, how far ours has been stepped back since it
// at the most (wallView.stepBackSince), after that first reading. Ours
// stepped back makes more than one such frame (a later frame reads again
// what an earlier one read), and the send is judged by the one that
// gained most since: judged by the last, a send before a step back of
// ours and a VM pause after it read nothing of the pause (the frames
// after the step all first shown before it), a key the server forgot
// judged fresh. A send before the first answer is judged by the first
// frame. The highest, not the last: one answer that reads low (a
// backend's clock behind, a cache's copy) takes nothing back.
func (g *hostGains) since(sent time.Time, back time.Duration) time.Duration {
	gain, top := time.Duration(0), time.Duration(0)
	for i := g.n - 1; i >= 0; i-- {
		f := &g.frames[i]
		if i+1 == g.n {
			if i == 0 || f.first.Before(sent) {
				gain = f.rose
			}
			top = f.top
			continue
		}
		next := g.frames[i+1].first
		ended := !next.Before(sent) || !f.end.Before(sent) ||
			!next.After(f.end) && sent.Before(next.Add(addSat(back, clockSlack)))
		if (i == 0 || f.first.Before(sent)) && ended {
			gain = max(gain, f.rose, top-f.off)
		}
		top = max(top, f.top)
	}
	return gain
}

// maxServerClocks bounds the hosts remembered (twice it for hosts a
// resend probed: learn), and the hosts probed: a client sends to a few
// hosts, and one that is given a new host per request must not grow this
// for ever. Past it, a new host takes the
// place of the one least recently heard from or sent to, if neither was
// within twice the longest key window, so that no resend still judged by
// its gains loses them (evictClock), and of the probe least recently
// asked for that is not under way (evictProbe): a host a service last
// called months ago (one per merchant) must not leave a new tenant's
// host with no clock learnt and no probe, its resends judged by our
// clock alone.
const maxServerClocks = 1024

// imfFixdateLen is the length of an IMF-fixdate ("Sun, 06 Nov 1994
// 08:49:37 GMT"), the only form a sender may generate (RFC 9110 5.6.7).
const imfFixdateLen = len(http.TimeFormat)

// learn remembers date, the Date of an answer from host that came when
// our clock read at. Only a field shaped as an IMF-fixdate replaces what
// an earlier answer taught, so that an absent or garbled Date (a proxy's,
// a device's) does not make the host's clock unknown; one that reads the
// same second as the last keeps that one's reading of our clock, the
// earlier, which never puts the server further ahead than it is. A Date
// that changes what is remembered ends the host's probe (firstProbe).
func (s *serverClocks) learn(host, date string, at time.Time) {
	if len(date) != imfFixdateLen || date[imfFixdateLen-4:] != " GMT" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.hosts[host]; ok {
		if e.date != date {
			e.date, e.at = date, at
			e.gains.observe(date, at)
			s.probeOver(host)
		}
		e.used = maxTime(e.used, at)
		return
	}
	if s.hosts == nil {
		s.hosts = make(map[string]*serverDate)
	}
	if len(s.hosts) >= maxServerClocks {
		s.evictClock(at)
	}
	// A host a resend asked about (its probe under way or over) is kept
	// past the bound, up to twice it: with every host within its key
	// windows (more than maxServerClocks heard from lately), its probe's
	// Date thrown away left the resends behind it judged by our clock
	// alone, no guard against ours stepped back.
	_, asked := s.probes[host]
	if len(s.hosts) < maxServerClocks || asked && len(s.hosts) < 2*maxServerClocks {
		e := &serverDate{date: date, at: at, used: at}
		e.gains.observe(date, at)
		s.hosts[host] = e
	}
	s.probeOver(host)
}

// sending records a send of ours to host, when our clock read at: its
// entry, if it has one, is kept for twice the longest key window since
// (evictClock), for the gains a resend of it is judged by (since) are
// those of answers before it as well as after. No entry is made.
func (s *serverClocks) sending(host string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.hosts[host]; ok && e.used.Before(at) {
		e.used = at
	}
}

// evictClock makes room for a host at now, s.mu held: it forgets the
// host least recently heard from or sent to, if that was more than keep
// (twice the longest key window) ago by our clock, monotonic where it
// has one, so that a step of ours does not age an entry, and a VM paused
// leaves it younger. No send of ours still within its key window is then
// judged by the host's gains, for a resend outside it is held back by
// our clock alone; a resend from an earlier process asks the host's
// clock again (a probe). Its probe goes with it, for one closed would
// let such a resend go unjudged; a host whose probe is under way is
// never the one dropped, for the probe's answer will teach it. None so
// old: the new host is not remembered.
func (s *serverClocks) evictClock(now time.Time) {
	if now.Before(s.noEvictBefore) {
		return
	}
	victim, oldest, found := "", time.Time{}, false
	for h, e := range s.hosts {
		if found && !e.used.Before(oldest) {
			continue
		}
		if s.probing(h) {
			continue
		}
		victim, oldest, found = h, e.used, true
	}
	if !found {
		return
	}
	if now.Sub(oldest) < s.keep {
		s.noEvictBefore = oldest.Add(s.keep)
		return
	}
	delete(s.hosts, victim)
	s.forgetProbe(victim)
}

// probing reports whether host's probe is under way; s.mu held.
func (s *serverClocks) probing(host string) bool {
	over, ok := s.probes[host]
	if !ok {
		return false
	}
	select {
	case <-over:
		return false
	default:
		return true
	}
}

// forgetProbe forgets host's probe and what it left (a host silent or
// refused, the root asked next): the next resend to the host that its
// clock cannot judge asks it first, as one to a host never probed; s.mu
// held.
func (s *serverClocks) forgetProbe(host string) {
	delete(s.probes, host)
	delete(s.again, host)
	delete(s.root, host)
	delete(s.probeAsked, host)
}

// evictProbe makes room for a probe, s.mu held: it forgets the probe
// least recently asked for (firstProbe) that is not under way, whose
// host's next resend then asks again: a HEAD more, never a resend
// unjudged. It reports false if every probe is under way.
func (s *serverClocks) evictProbe() bool {
	victim, oldest, found := "", time.Time{}, false
	for h := range s.probes {
		at := s.probeAsked[h]
		if found && !at.Before(oldest) || s.probing(h) {
			continue
		}
		victim, oldest, found = h, at, true
	}
	if found {
		s.forgetProbe(victim)
	}
	return found
}

// now is the time by host's clock when ours reads now: the last Date
// learnt plus the time since its answer came. It reports false without a
// Date that parses. A Date days off ours is reported too: it only ever
// holds a resend back (resendBlock judges by it only when it reads
// ahead of ours), and ours behind by days is the clock it is there for
// (a board without a real-time clock restarted at the time saved at its
// shutdown, days ago), where a key forgotten days ago looks fresh. A
// server's Date wrong by days ahead costs a look at each operation an
// earlier process left that a resend would settle; one wrong behind
// (1970) holds nothing back.
func (s *serverClocks) now(host string, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	var date string
	var at time.Time
	e, ok := s.hosts[host]
	if ok {
		date, at = e.date, e.at
	}
	s.mu.Unlock()
	if !ok {
		return time.Time{}, false
	}
	d, err := http.ParseTime(date)
	if err != nil {
		return time.Time{}, false
	}
	return d.Add(now.Sub(at)), true
}

// gainSince is how far host's clock has gained on ours since a send of
// ours that read sent, ours stepped back at most back since
// (hostGains.since); zero if no answer from it has taught it.
func (s *serverClocks) gainSince(host string, sent time.Time, back time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.hosts[host]
	if !ok {
		return 0
	}
	return e.gains.since(sent, back)
}

// firstProbe says how a resend to host that its clock cannot judge (none
// of its answers has taught it) may go: first, it sends the host's probe
// (headProbe), and probed must follow, whatever the probe's end; wait
// not nil, it waits for the probe (or a Date from the host) first;
// neither, the probe is over and it goes as it is judged. A probe that
// got no answer (unanswered) is sent again by the next resend that asks
// once our clock reads now at or past the time given. Past
// maxServerClocks probes, the least recently asked for makes room
// (evictProbe); with every one under way, the host gets no probe.
func (s *serverClocks) firstProbe(host string, now time.Time) (first bool, wait <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	over, ok := s.probes[host]
	if !ok {
		if len(s.probes) >= maxServerClocks && !s.evictProbe() {
			return false, nil
		}
		if s.probes == nil {
			s.probes = make(map[string]chan struct{})
			s.probeAsked = make(map[string]time.Time)
		}
		s.probes[host] = make(chan struct{})
		s.probeAsked[host] = now
		return true, nil
	}
	s.probeAsked[host] = now
	select {
	case <-over:
		if from, ok := s.again[host]; ok && !now.Before(from) {
			delete(s.again, host)
			s.probes[host] = make(chan struct{})
			return true, nil
		}
		return false, nil
	default:
		return false, over
	}
}

// unanswered ends host's probe, which got no answer: it failed at once
// (refused, reset, a name not resolved: a host not up yet), or timed out
// (a silent host: a black-holed route, a firewall dropping packets; or
// one slower than the attempt timeout). After a refusal its waiters, and
// its sender, are held too (driver.refusedProbe: a caller waits its
// backoff, Resume and Run hand the operation off) until the host is asked
// again, for the host may be back before their resends would be; after
// a timeout they are handed off, as every resend to the host is until a
// resend asks it again, the first from from on (silent). The host
// may answer a later resend, which then asks it first, so that a host
// coming back is not sent the resends of every visit under way on a clock
// nothing taught: the first resend that asks once our clock reads from
// (at once, if zero) sends it again. A silent host is given an attempt
// timeout between its probes, or each resend would send one.
func (s *serverClocks) unanswered(host string, from time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.probes[host]; !ok {
		return
	}
	s.probeOver(host)
	if s.again == nil {
		s.again = make(map[string]time.Time)
	}
	s.again[host] = from
	if !from.IsZero() {
		// A HEAD on the path may run the path's GET handler (Rails,
		// Django and Flask serve HEAD with it), a listing slower than the
		// attempt timeout while the POSTs answer at once: asked there
		// only, the host would hold its resends until their key window
		// passed. The root runs no handler of the path; if it is silent
		// too, the path is asked again next.
		if s.root == nil {
			s.root = make(map[string]bool)
		}
		s.root[host] = !s.root[host]
	}
}

// rootNext reports whether host's next probe asks the host's root: its
// last probe to the operation's path timed out (unanswered).
func (s *serverClocks) rootNext(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.root[host]
}

// silent reports until when a resend to host, whose clock no answer has
// taught, must wait: its last probe timed out (unanswered with a time)
// and no probe has asked the host since. Sent now, the resend would go on
// a clock nothing taught to a host that may be only slow, not gone (it
// answers after the attempt timeout, having done the work): a second
// order on each key the server has forgotten, if ours was stepped back.
// A time already past still holds it: the resend is handed off, due at
// once, and its next turn asks the host (firstProbe). Judged by the time
// alone, a resend whose turn came late (a process stalled, a VM paused
// between the probe's end and the resend's look at the clock) went
// unjudged.
//
// asked reports that the host's last probe left no such mark, nor a
// refusal's (unanswered with no time): none got no answer, or one has
// asked the host since (under way, over, or given up). Read under the
// same lock as the mark, so that a resend behind a probe that timed out
// or was refused tells the host asked again from the host never silent
// (unasked).
func (s *serverClocks) silent(host string) (until time.Time, ok, asked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, marked := s.again[host]
	if !marked || from.IsZero() {
		return time.Time{}, false, !marked
	}
	return from, true, false
}

// probed ends host's probe: it is over, sent; or, not sent (a lease lost
// before it, the context of the drive sending it ended), it is given up,
// and the next resend to the host sends it again, so that its waiters do
// not go on a clock nothing taught. An empty host is no probe.
func (s *serverClocks) probed(host string, sent bool) {
	if host == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probeOver(host)
	if !sent {
		delete(s.probes, host)
		delete(s.again, host)
		delete(s.probeAsked, host)
	}
}

// probeDone reports whether over, which a resend to host waited on, was
// the probe's end (its attempt, or a Date), not its giving up (probed).
func (s *serverClocks) probeDone(host string, over <-chan struct{}) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probes[host] == over
}

// probeOver closes host's probe, if one is under way; s.mu held. The
// closed channel stays, so that no later resend becomes a probe again.
func (s *serverClocks) probeOver(host string) {
	if len(s.probes) == 0 {
		return
	}
	if over, ok := s.probes[host]; ok {
		select {
		case <-over:
		default:
			close(over)
		}
	}
}

// serverNow is the time by the clock of rec's host when ours reads now
// (serverClocks.now); false if no answer from it has taught it.
func (c *Client) serverNow(rec *journal.Record, now time.Time) (time.Time, bool) {
	u, err := c.parsedURL(rec.URL)
	if err != nil {
		return time.Time{}, false
	}
	return c.clocks.now(u.Host, now)
}

// hostGain is how far the clock of rec's host has gained on ours since
// rec was first sent, ours stepped back at most back since
// (hostGains.since); zero if no answer from it has taught it.
func (c *Client) hostGain(rec *journal.Record, back time.Duration) time.Duration {
	u, err := c.parsedURL(rec.URL)
	if err != nil {
		return 0
	}
	return c.clocks.gainSince(u.Host, rec.FirstSent, back)
}

// headProbe asks the clock of u's host: a HEAD to u's path (to the
// host's root instead if root, after one to the path timed out), whose
// answer's Date, if usable, is learnt (serverClocks.learn). HEAD is safe
// (RFC 9110 9.2.1, 9.3.2: no body, nothing done), so unlike a resend it
// cannot be a second order on a key the server has forgotten, and any
// answer teaches: a 401, 404, 405 or 501, or a proxy's page, carries a
// Date, an origin's or an intermediary's, which is the true time within
// seconds, which is what a clock stepped back lacks (RFC 9110 6.6.1).
//
// It goes through the Client's http.Client, so that a Transport's proxy
// and TLS settings apply, with no body, no key and nothing journaled:
// the query string, user info and journaled headers stay off it (they
// may carry credentials, and the answer needs none), and the request
// hook does not see it (a hook may sign a body or a POST, and fail on a
// request it was never meant for; it is for the operation's requests).
// Redirects are not followed (the Client's CheckRedirect); the answer's
// body is never read. It is no attempt of any operation: not journaled,
// not in the retry budget, no AttemptEvent; one debug line.
//
// It reports how the probe ended: answered (or never sendable); timed
// out (a silent host, which costs one attempt timeout, not one per
// resend); or failed at once (connection refused, reset, a name not
// resolved: a host not up yet, a restored VM's network not ready). Either
// of the last two taught nothing, and the host may answer a later resend,
// which then asks it first (serverClocks.unanswered).
func (c *Client) headProbe(ctx context.Context, u *url.URL, root bool) probeEnd {
	target := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if root {
		target.Path, target.RawPath = "/", ""
	}
	if ctx.Err() != nil {
		// A call given up (a Resume's deadline, Close) while its probe
		// waited for its turn: nothing is sent. A Transport of the
		// caller's may not look at the context before sending.
		return probeFailed
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodHead, target.String(), nil)
	if err != nil {
		return probeAnswered // never will be sent: nothing to wait for
	}
	// A shared cache in between keeps the Date of the answer it stored,
	// the origin's then (RFC 9111 4; a 404 or 405 is heuristically
	// cacheable, RFC 9110 15.1): hours old, it would teach a clock as
	// far behind as the stepped one. no-cache has it ask the origin.
	req.Header["Cache-Control"] = []string{"no-cache"}
	resp, err := c.hc.Do(req)
	end := c.cfg.clock.Now()
	if err != nil {
		end := probeFailed
		if te := (interface{ Timeout() bool })(nil); errors.As(err, &te) && te.Timeout() {
			end = probeTimedOut
		}
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // its text names the URL
		}
		c.logProbe(ctx, u.Host, slog.Any("err", err))
		return end
	}
	_ = resp.Body.Close()
	date := aged(headerValue(resp.Header, "Date"), resp.Header["Age"])
	c.clocks.learn(u.Host, date, end)
	c.logProbe(ctx, u.Host, slog.Int("status", resp.StatusCode), slog.String("date", date))
	return probeAnswered
}

// probeEnd is how a clock probe (headProbe) ended.
type probeEnd uint8

const (
	probeAnswered probeEnd = iota // an answer, or a HEAD that cannot be sent
	probeTimedOut                 // no answer within the attempt timeout
	probeFailed                   // failed at once: refused, reset, unresolved
)

// logProbe logs headProbe's end at debug level: the host only, never the
// URL's path or query.
func (c *Client) logProbe(ctx context.Context, host string, attrs ...slog.Attr) {
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.LogAttrs(ctx, slog.LevelDebug, "idem: clock probe", append([]slog.Attr{slog.String("host", host)}, attrs...)...)
	}
}

// maxAge is the Age a cache sends for any greater one (RFC 9111 1.2.2).
const maxAge = 1 << 31

// aged is an answer's Date as the host's clock reads it now: a
// cache that served it from a copy keeps the origin's Date of then and
// sends how long ago that was as Age (RFC 9111 4, 4.2.3, 5.1). CDNs serve
// a copy whatever the request's no-cache (Fastly, Cloudflare and
// CloudFront ignore request Cache-Control by default), and the host's
// root, asked after the path timed out, is most often such a copy (a
// landing page cached for hours): its Date alone reads the host's clock
// as far behind as a stepped one, and a key the server forgot would look
// fresh. An Age that is not delta-seconds leaves a copy of unknown age:
// it teaches nothing ("").
func aged(date string, age []string) string {
	if len(age) == 0 {
		return date
	}
	secs, err := strconv.ParseUint(age[0], 10, 64) // no sign, no space
	if err != nil {
		return ""
	}
	if secs == 0 {
		return date
	}
	d, err := http.ParseTime(date)
	if err != nil {
		return date
	}
	return d.Add(time.Duration(min(secs, maxAge)) * time.Second).UTC().Format(http.TimeFormat)
}
