package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemkit/idem/journal"
)

// resumeGiveUp is how many visits in a row to one host must get nowhere
// before Resume and Run take the host for unreachable: for Resume, end
// unknown or unsent, or flagged after no answer (each such visit holds
// start-up); for Run, whose visits never wait, get no answer from the
// host. During an outage each visit spends its whole budget (60 s by
// default against a server that never answers, one attempt's timeout
// for Run): visiting a backlog of
// thousands that way would hold a service's start-up for hours, and the
// reconciliation of every other server's operations behind it, for
// nothing that a later visit will not do as well once the server is back.
func resumeGiveUp(concurrency int) int { return max(8, 2*concurrency) }

// hostReach is what a drive's own exchanges told of its host.
type hostReach int

const (
	reachNone     hostReach = iota // it made no exchange
	reachSilent                    // no answer, or only a gateway's or an unavailable server's (silentStatus)
	reachAnswered                  // the server answered at least once
)

// hostNews is what a drive's own exchanges told of its host (hostOf).
type hostNews struct {
	reach hostReach
	// stuckElsewhere: a query of the drive's own to a result endpoint on
	// another host, which reach leaves out, got no answer or was told to
	// wait (stuckElsewhere).
	stuckElsewhere bool
	// rest: the host's last answer was a 429 or 503 asking this client to
	// wait (Retry-After, bounded by the reconciler's maximum) until then.
	rest time.Time
	// throttled: the host's last answer was a 429 that said nothing of
	// how long to wait (no rest).
	throttled bool
	// letThrough: the host's last answer was its own and no 429 (not
	// silentStatus): its limiter, if any, let the request through.
	letThrough bool
}

// unheard reports whether the drive exchanged with its host and heard
// nothing from it, or made no exchange with it and got no answer from a
// result endpoint on another host (or was told to wait there): what it
// ended with came of our clock, not of any server's word, and the next
// visit to the host would fare no better.
func (n hostNews) unheard() bool {
	return n.reach == reachSilent || n.reach == reachNone && n.stuckElsewhere
}

// lastHostExchange is the last exchange of rec numbered after `after`
// with its host (hostOf; a query counts only when queriesHost says so),
// if the last exchange of all was one.
func lastHostExchange(rec *journal.Record, after int, queriesHost bool) (journal.Attempt, bool) {
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		a := rec.Attempts[i]
		if a.Number <= after {
			return journal.Attempt{}, false
		}
		if !a.Done || closedUnsent(a) {
			continue
		}
		if a.Kind == journal.AttemptQuery && !queriesHost {
			return journal.Attempt{}, false
		}
		return a, true
	}
	return journal.Attempt{}, false
}

// throttleNews is what the last exchange of rec numbered after `after`
// with its host (lastHostExchange) told of the host's limiter, given
// until, when the exchange's Retry-After ends (zero: none). A 429 or 503
// with a Retry-After is the host's word to this client, not to one
// request: RFC 6585 and RFC 9110 ask the client to wait before making a
// new request; so is a 429 with none (throttled), for as long as the
// client's backoff says.
func throttleNews(news *hostNews, rec *journal.Record, after int, queriesHost bool, until time.Time) {
	a, ok := lastHostExchange(rec, after, queriesHost)
	if !ok {
		return
	}
	switch {
	case (a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable) && !until.IsZero():
		news.rest = until
	case a.Status == http.StatusTooManyRequests:
		news.throttled = true
	case !silentStatus(a.Status):
		news.letThrough = true
	}
}

// stuckElsewhere reports whether a query of rec numbered after `after`
// to a result endpoint on another host than its own (queriesHost false)
// got no answer (silentStatus), or has none journaled, or was answered
// 429: the next operation's query would fare no better.
func stuckElsewhere(rec *journal.Record, after int, queriesHost bool) bool {
	if queriesHost {
		return false
	}
	for _, a := range rec.Attempts {
		if a.Number > after && a.Kind == journal.AttemptQuery && (!a.Done || silentStatus(a.Status) || a.Status == http.StatusTooManyRequests) {
			return true
		}
	}
	return false
}

// reachOf is what the exchanges of rec numbered after `after` told of its
// host (hostOf, the submit URL's). Queries count only when queriesHost
// says the result endpoint is on that host: another host's silence says
// nothing of it. One closed unsent (closedUnsent: withheld because
// another process flagged the operation meanwhile) told nothing either:
// taken for silence, a visit that sent nothing counted towards marking a
// host that answers unreachable (hostStalls).
func reachOf(rec *journal.Record, after int, queriesHost bool) hostReach {
	reach := reachNone
	for _, a := range rec.Attempts {
		if a.Number <= after || !a.Done || closedUnsent(a) || a.Kind == journal.AttemptQuery && !queriesHost {
			continue
		}
		if !silentStatus(a.Status) {
			return reachAnswered
		}
		reach = reachSilent
	}
	return reach
}

// silentStatus reports whether an exchange answered with status (0: no
// answer) says nothing from the server itself: no answer, or a gateway's
// or an unavailable server's (502, 503, 504), or Cloudflare's edge
// speaking for an origin it could not get an answer from (520 unknown
// error, 521 web server down, 522 connection timed out, 523 origin
// unreachable, 524 a timeout occurred, 525 and 526 its TLS, 530 its DNS:
// support.cloudflare.com/hc/en-us/articles/115003011431). An API behind
// Cloudflare whose servers are down answers nothing else for hours.
func silentStatus(status int) bool {
	switch status {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
		520, 521, 522, 523, 524, 525, 526, 530:
		return true
	}
	return false
}

// hostStalls counts, per host, the visits in a row that got nowhere (as
// resumeGiveUp says), and names the hosts that look unreachable: giveUp
// such visits in a row, and none since that got anywhere. Not safe for
// concurrent use.
type hostStalls struct {
	giveUp int
	// maxRest bounds a rest (Run's longest interval): a rest further
	// ahead was set while the clock ran fast, and is over.
	maxRest time.Duration
	// firstRest is the first rest after a 429 that named no wait (Run's
	// interval); each one after it in a row doubles it (throttled).
	firstRest time.Duration
	rest      map[string]time.Time    // host → when its Retry-After (or its backoff: throttled) ends
	backoff   map[string]*hostBackoff // host → its rests since its last answer let through
	streak    map[string]int          // host → its visits in a row that got nowhere
	strayed   map[string]int          // host → those of its streak that got nowhere only elsewhere (strayedFrom)
	failing   map[string]time.Time    // host → when the first of those ended
	lastFail  map[string]time.Time    // host → when the last of those ended
	down      map[string]time.Time    // host → when it was found unreachable
	slow      map[string]time.Time    // host → when Run took it for slow (visitFair), while its operations wait (passJudged)
	slowWait  map[string]time.Time    // host → when the last operation Run pushed back for it falls due
	postponed map[string]map[opID]time.Time
	back      []string // hosts found answering again, whose postponed operations are not due yet
	// paced: the hosts that asked for rest; one in it gets one visit at a
	// time (pacedAlone) until share (WithResumeConcurrency) of its answers
	// in a row are let through. One entry a host, so that no path sets or
	// ends one part of a host's pacing and forgets another.
	paced map[string]*pacing
	share int
	// through: the hosts that let a request of Run's through since
	// wakeAt last looked.
	through map[string]bool
}

func newHostStalls(giveUp int) *hostStalls {
	return &hostStalls{giveUp: giveUp, streak: map[string]int{}, strayed: map[string]int{}, failing: map[string]time.Time{}, lastFail: map[string]time.Time{}, down: map[string]time.Time{},
		rest: map[string]time.Time{}, paced: map[string]*pacing{}, through: map[string]bool{}, backoff: map[string]*hostBackoff{}, postponed: map[string]map[opID]time.Time{}, slow: map[string]time.Time{}, slowWait: map[string]time.Time{}}
}

// slowed records that a pass of Run took host for slow at now; a host
// still slow since an earlier pass keeps that pass's time. A host whose
// last visits got no answer is failing, not slow: a slow host answers in
// the end, and one that holds requests until they time out (a load
// balancer before a dead backend) looks slow only until they do.
func (h *hostStalls) slowed(host string, now time.Time) {
	if _, ok := h.slow[host]; !ok && h.streak[host] == 0 {
		h.slow[host] = now
	}
}

// passJudged ends a pass of Run's judgement of slow hosts, at now:
// judged names the hosts the pass visited, each with whether it took the
// host for slow, and pushed when the last operation it pushed back for
// each host falls due. A host it visited and did not take for slow is
// slow no more. Nor is one none of whose pushed-back operations waits
// any more: the pass that took it for slow may have settled every
// operation of it that was due, and Run visits a host only for its due
// operations, which most of its calls (settled in Do) never leave: such
// a host would stay listed for as long as Run runs. A wait further ahead
// than Run's longest interval was set while the clock ran fast, and is
// over.
func (h *hostStalls) passJudged(judged map[string]bool, pushed map[string]time.Time, now time.Time) {
	for host, until := range pushed {
		if until.After(h.slowWait[host]) {
			h.slowWait[host] = until
		}
	}
	for host, slow := range judged {
		if !slow {
			delete(h.slow, host)
		}
	}
	for host := range h.slow {
		if until := h.slowWait[host]; !until.After(now) || beyondSlack(until, now, h.maxRest) {
			delete(h.slow, host)
		}
	}
	for host := range h.slowWait {
		if _, ok := h.slow[host]; !ok {
			delete(h.slowWait, host)
		}
	}
}

// hostChange is what a visit told of its host's reachability.
type hostChange int

const (
	hostUnchanged hostChange = iota
	hostFoundDown            // the visit made the streak that marks the host unreachable
	hostBack                 // a visit to an unreachable host got somewhere
)

// visited records where a visit to host, ending at now, left its
// operation.
func (h *hostStalls) visited(host string, stalled bool, now time.Time) hostChange {
	if !stalled {
		delete(h.streak, host)
		delete(h.strayed, host)
		delete(h.failing, host)
		delete(h.lastFail, host)
		if _, down := h.down[host]; down {
			delete(h.down, host)
			if len(h.postponed[host]) > 0 {
				h.back = append(h.back, host)
			}
			return hostBack
		}
		return hostUnchanged
	}
	if h.streak[host]++; h.streak[host] == 1 {
		h.failing[host] = now
	}
	delete(h.slow, host) // it did not answer in the end: failing (slowed)
	delete(h.slowWait, host)
	h.lastFail[host] = now
	if _, down := h.down[host]; !down && h.streak[host] >= h.giveUp && h.streak[host] > h.strayed[host] {
		h.down[host] = now
		return hostFoundDown
	}
	return hostUnchanged
}

// strayedFrom records a visit to host, ending at now, that made no
// exchange with host and got nowhere with another (a result endpoint on
// a host of its own that did not answer): it lengthens the streak, but
// marks host unreachable only with a visit host itself left unanswered
// in it (visited). The other host's silence says nothing of this one:
// Resume gave up on an orders host that was up because its orders past
// their key window, flagged after querying a read service still down,
// came first in the journal, and left those inside their window, which
// a resend it would have made settles at once, to Run, which resends
// none of them while their result endpoint is silent.
func (h *hostStalls) strayedFrom(host string, now time.Time) hostChange {
	h.strayed[host]++
	return h.visited(host, true, now)
}

// rested records that host asked this client to send nothing before
// until (throttleNews), and paces it: one visit at a time from then on
// (pacedAlone).
func (h *hostStalls) rested(host string, until time.Time) {
	if until.After(h.rest[host]) {
		h.rest[host] = until
	}
	p := h.pacingOf(host)
	if until.After(p.restEnd) {
		p.restEnd = until
	}
	p.answers = 0
}

// pacing is a paced host's pacing (hostStalls.paced).
type pacing struct {
	answers int       // answers let through in a row since it last asked for rest (letThrough)
	restEnd time.Time // when the last rest it asked for ends (unpace)
	slot    pacedSlot // its last postponed operation's (nextSlot)
}

// pacingOf is host's pacing, host paced from now on if it was not.
func (h *hostStalls) pacingOf(host string) *pacing {
	p := h.paced[host]
	if p == nil {
		p = &pacing{}
		h.paced[host] = p
	}
	return p
}

// unpace ends the pacing of the hosts whose last rest ended more than
// maxRest before now, as letThrough does after their share of answers in
// a row: throttled takes a 429 that late for a new throttle anyway. A
// host given one 429 and then visited fewer times than its share (its
// operations settled elsewhere, or few of them) stayed paced for as long
// as Run ran, an entry each, with tenants' hosts without end.
func (h *hostStalls) unpace(now time.Time) {
	for host, p := range h.paced {
		if now.Sub(p.restEnd) > h.maxRest {
			h.endPacing(host)
		}
	}
}

// forgetBackoffs drops the backoffs whose last rest ended more than
// maxRest before now, which throttled would start afresh anyway: a host
// whose last answer to Run was such a 429, its operations then settled
// elsewhere (by Do, Confirm, another replica), is never visited again,
// and one such host per merchant kept an entry each for as long as Run
// ran.
func (h *hostStalls) forgetBackoffs(now time.Time) {
	for host, bo := range h.backoff {
		if now.Sub(bo.restEnd) > h.maxRest {
			delete(h.backoff, host)
		}
	}
}

// endPacing gives host its share of visits at once again, and has
// bringBack make due what was postponed for it, unless the host looks
// unreachable: claimed again, its backlog would be probed once and
// postponed again (two writes each for nothing), and its first answer
// brings it back (visited).
func (h *hostStalls) endPacing(host string) {
	delete(h.paced, host)
	if len(h.postponed[host]) > 0 && !h.isDown(host) {
		h.back = append(h.back, host)
	}
}

// pacedAlone reports whether host gets one of Run's visits at a time: it
// asked for rest, and fewer than its share of answers in a row have been
// let through since. A limiter that lets one request a second through
// (Shopify's leaky bucket, GitHub's secondary limit: 429 with
// Retry-After: 1) refuses all but one of a burst: sent its whole share
// at once as each rest ended, a backlog had one order a pass let through
// and the others 429, each resent later with a longer backoff of its own,
// and 209 of 400 orders went past their key window, for a person. One at
// a time, the visit after the one let through is refused, and the rest of
// the host's due operations wait for the rest's end without a send.
func (h *hostStalls) pacedAlone(host string) bool {
	_, ok := h.paced[host]
	return ok
}

// pacedSlot is when the last operation postponed for a paced host falls
// due (nextSlot), and how many fall due then.
type pacedSlot struct {
	at time.Time
	n  int
}

// nextSlot is when the next operation postponed for paced host falls due:
// behind those postponed before, its share (WithResumeConcurrency) at a
// time, every step from the rest's end (until) on; the pass at each
// takes about the share that one visit at a time can send. Those the
// pass claims and does not visit queue up again at the end.
func (h *hostStalls) nextSlot(host string, until time.Time, step time.Duration) time.Time {
	// The line is part of the host's pacing: postpone calls this only
	// for a paced host (pacedAlone), whose pacing pacingOf finds.
	p := h.pacingOf(host)
	s := p.slot
	// The line outlives the rest it was set by, and is compared with the
	// next by the monotonic reading, but the journal keeps only the wall
	// one: re-based on until's wall clock, a place keeps its distance
	// from the rest's end across a step. Kept as set, a step forward of
	// a day wrote every place 23h59m in the past (every pass full of the
	// host's backlog, due at once and postponed again, the other hosts'
	// operations sorted after it), a step back a day ahead.
	if !s.at.IsZero() {
		s.at = until.Add(s.at.Sub(until))
	}
	switch {
	case s.at.Before(until):
		s = pacedSlot{at: until}
	case s.n >= max(h.share, 1):
		s = pacedSlot{at: s.at.Add(step)}
	}
	s.n++
	p.slot = s
	return s.at
}

// wakeAt is the earliest end of a rest still ahead of now (restUntil) of
// a host that let a request of Run's through since the last call, if
// any. Only such a host is worth a pass at its rest's end: one that
// refuses everything (every request 429, Retry-After: 1, for an hour)
// would get a pass a second for nothing, each claiming and postponing
// its whole backlog again.
func (h *hostStalls) wakeAt(now time.Time) (time.Time, bool) {
	var first time.Time
	for host := range h.through {
		if until, ok := h.restUntil(host, now); ok && (first.IsZero() || until.Before(first)) {
			first = until
		}
	}
	clear(h.through)
	return first, !first.IsZero()
}

// throttled records that host answered a request 429 at now, naming no
// wait: Stripe's rate_limit and lock_timeout, Amazon API Gateway's
// throttling, whose docs ask for exponential backoff. Sent every due
// operation on every pass instead, a backlog of 200 put 2200 requests
// an hour into the limiter. The host rests from firstRest on, doubling
// (jittered) with each such 429 after a rest, up to maxRest, until an
// answer is let through (letThrough). A 429 while the host rests answers
// a request sent before the rest began: the same throttle, no new one.
func (h *hostStalls) throttled(host string, now time.Time) {
	if _, ok := h.restUntil(host, now); ok {
		return
	}
	bo := h.backoff[host]
	// Nothing let through since may only mean nothing was sent: the
	// host's operations settled by another replica's Run, by Do or by
	// Confirm. A 429 longer after the last rest than any rest lasts is
	// a throttle of its own; kept, one a week later rested the host an
	// hour, its operations postponed past their key window.
	if bo == nil || now.Sub(bo.restEnd) > h.maxRest {
		bo = &hostBackoff{ExponentialBackOff: jitteredBackoff(h.firstRest, h.maxRest)}
		h.backoff[host] = bo
	}
	// The jitter may draw past the maximum, which restUntil takes for a
	// rest set by a clock running fast; past a huge one, it overflows.
	d := bo.NextBackOff()
	if d < 0 || d > h.maxRest {
		d = h.maxRest
	}
	bo.restEnd = now.Add(d)
	h.rested(host, bo.restEnd)
}

// hostBackoff is a host's backoff after 429s that named no wait
// (throttled), and when the last rest it set ends.
type hostBackoff struct {
	*backoff.ExponentialBackOff
	restEnd time.Time
}

// letThrough records that host answered a request other than 429: its
// next 429 that names no wait rests it firstRest again, and once its
// share of answers in a row are let through, it gets its share of
// visits at once again (pacedAlone). The rest under way, if any, still
// ends when it was to.
func (h *hostStalls) letThrough(host string) {
	delete(h.backoff, host)
	h.through[host] = true
	if p, ok := h.paced[host]; ok {
		if p.answers+1 >= h.share {
			h.endPacing(host)
		} else {
			p.answers++
		}
	}
}

// restUntil reports until when host asked this client to send nothing, if
// that is still ahead of now and within maxRest of it.
func (h *hostStalls) restUntil(host string, now time.Time) (time.Time, bool) {
	until, ok := h.rest[host]
	if !ok {
		return time.Time{}, false
	}
	if !until.After(now) || beyondSlack(until, now, h.maxRest) {
		delete(h.rest, host)
		return time.Time{}, false
	}
	return until, true
}

// report is what Health tells of the hosts whose visits fail, that
// answer slowly or that asked for rest, at most HealthMaxHosts of them:
// those taken for unreachable first (the longest so first), then those
// failing (the longest first), then those slow (the longest first), then
// those only resting; and how many it left out.
// Its cost grows with the hosts in trouble, not with the operations.
func (h *hostStalls) report(now time.Time) ([]HostHealth, int) {
	byHost := make(map[string]*HostHealth, len(h.streak)+len(h.slow)+len(h.rest))
	entry := func(host string) *HostHealth {
		e := byHost[host]
		if e == nil {
			e = &HostHealth{Host: host}
			byHost[host] = e
		}
		return e
	}
	for host, n := range h.streak {
		e := entry(host)
		e.FailedVisits, e.FailingSince, e.LastFailedVisit = n, h.failing[host], h.lastFail[host]
	}
	for host, since := range h.down {
		entry(host).DownSince = since
	}
	for host, since := range h.slow {
		entry(host).SlowSince = since
	}
	for host := range h.rest {
		if until, ok := h.restUntil(host, now); ok {
			entry(host).RestUntil = until
		}
	}
	if len(byHost) == 0 {
		return nil, 0
	}
	out := make([]HostHealth, 0, len(byHost))
	for _, e := range byHost {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b HostHealth) int {
		if c := cmpSince(a.DownSince, b.DownSince); c != 0 {
			return c
		}
		if c := cmpSince(a.FailingSince, b.FailingSince); c != 0 {
			return c
		}
		if c := cmpSince(a.SlowSince, b.SlowSince); c != 0 {
			return c
		}
		if c := b.RestUntil.Compare(a.RestUntil); c != 0 {
			return c
		}
		return strings.Compare(a.Host, b.Host)
	})
	if len(out) > HealthMaxHosts {
		return slices.Clip(out[:HealthMaxHosts]), len(out) - HealthMaxHosts
	}
	return out, 0
}

// cmpSince orders the earlier of two "since" times first, and a zero
// one (not so) last.
func cmpSince(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return 1
	case b.IsZero():
		return -1
	}
	return a.Compare(b)
}

// isDown reports whether host looks unreachable.
func (h *hostStalls) isDown(host string) bool {
	_, down := h.down[host]
	return down
}

// postpone pushes the operations of refs, which Run claimed and did not
// visit because their host asked for rest, back to the rest's end, or
// because it looks unreachable, back by about as long as the host has
// been so (at least the reconcile interval, at most its maximum): the
// next pass then reaches the other hosts' due operations instead of
// claiming the same backlog again, and one probe a pass tells
// when the host is back (then bringBack makes them due at once). A paced
// host's (pacedAlone) queue up behind those postponed for it before, its
// share to each of its later rests (nextSlot), and come due at once when
// it is paced no more: one visit at a time, a limiter that lets one
// request a second through takes one of them a pass, and all postponed
// to the rest's end, every pass claimed and wrote back its whole backlog
// again, 254 fsync'd commits a second for one order settled. Only
// NextDue changes, under the pass's lease: nothing about the operation is
// decided. One whose host answered later in the pass is left due: the
// next pass visits it (bringBack knows only what postpone recorded, and
// the host has no outage left to time). It returns the first journal
// error.
func (c *Client) postpone(ctx context.Context, refs []ref, stalls *hostStalls) error {
	wctx := context.WithoutCancel(ctx)
	now := c.cfg.clock.Now()
	n := 0
	for _, r := range refs {
		var due time.Time
		since, down := stalls.down[r.host]
		if down {
			due = now.Add(c.spread(now.Sub(since)))
		}
		if until, ok := stalls.restUntil(r.host, now); ok {
			if !down && stalls.pacedAlone(r.host) {
				// No further than Run's longest interval: past the
				// hourly reschedule's reach, a place was made due at
				// once (two writes more) with a warning of a clock
				// stepped back that never was.
				slot := stalls.nextSlot(r.host, until, min(max(until.Sub(now), minRestWait), c.poll()))
				until = minTime(slot, maxTime(until, now.Add(c.cfg.reconcileMax)))
			}
			due = maxTime(due, until)
		}
		if due.IsZero() {
			continue
		}
		rec, err := c.moveDue(journal.WithLease(wctx, r.lease), r.scope, r.key, func(rec *journal.Record) (time.Time, bool) {
			return due, rec.NextDue.Before(due)
		})
		if err != nil {
			return fmt.Errorf("idem: reconcile: postpone: %w", err)
		}
		if rec == nil {
			continue
		}
		n++
		// Only an unreachable host's, or a paced one's: bringBack makes
		// them due when it answers again, or lets its share through at
		// once. A rest ends by itself.
		if down || stalls.pacedAlone(r.host) {
			if stalls.postponed[r.host] == nil {
				stalls.postponed[r.host] = map[opID]time.Time{}
			}
			stalls.postponed[r.host][opID{r.scope, r.key}] = rec.NextDue
		}
	}
	if n > 0 {
		c.log.LogAttrs(ctx, slog.LevelDebug, "idem: reconciler: postponed the operations of unreachable hosts", slog.Int("count", n))
	}
	return nil
}

// bringBack makes due now the operations postpone pushed back whose host
// answers again, unless something rescheduled them since (a drive, or a
// server's Retry-After, which must be honoured). It returns the first
// journal error; what it did not bring back stays due when postponed.
func (c *Client) bringBack(ctx context.Context, stalls *hostStalls) error {
	wctx := context.WithoutCancel(ctx)
	for len(stalls.back) > 0 {
		host := stalls.back[0]
		now := c.cfg.clock.Now()
		for id, due := range stalls.postponed[host] {
			// Unfenced, as reschedule: a drive under way writes its own
			// NextDue when it ends.
			_, err := c.moveDue(wctx, id.scope, id.key, func(rec *journal.Record) (time.Time, bool) {
				// Within a millisecond: a Store may keep times coarser
				// than Go's (PostgreSQL: microseconds).
				return now, rec.NextDue.Sub(due).Abs() < time.Millisecond
			})
			if err != nil {
				return fmt.Errorf("idem: reconcile: bring back: %w", err)
			}
			delete(stalls.postponed[host], id)
		}
		delete(stalls.postponed, host)
		stalls.back = stalls.back[1:]
	}
	return nil
}

// forgetDue drops what postpone recorded that is due by now: the
// operation is due anyway, and bringBack has nothing left to do for it.
// A visit drops its own entry, but one settled elsewhere (another
// replica's Run, Do, Confirm, a prune) is never visited here: kept, a
// host paced for days gathered an entry for each, and an Update each
// when it was paced no more.
func (h *hostStalls) forgetDue(now time.Time) {
	for host, ops := range h.postponed {
		for id, due := range ops {
			if !due.After(now) {
				delete(ops, id)
			}
		}
		if len(ops) == 0 {
			delete(h.postponed, host)
		}
	}
}

// moveDue sets the NextDue of (scope, key) to what to returns for the
// stored record, when it says so; nothing else changes, and a lease in
// ctx fences the write. It returns the record written, or nil and no
// error when the record was settled, gone or taken over meanwhile: not
// the caller's to move.
func (c *Client) moveDue(ctx context.Context, scope, key string, to func(*journal.Record) (time.Time, bool)) (*journal.Record, error) {
	rec, err := c.store.Update(ctx, scope, key, func(r *journal.Record) error {
		if due, ok := to(r); ok {
			r.NextDue = due
		}
		return nil
	})
	if errors.Is(err, journal.ErrTerminal) || errors.Is(err, journal.ErrNotFound) || errors.Is(err, journal.ErrLeaseLost) {
		return nil, nil
	}
	return rec, err
}

// spread is d clamped to the reconciler's interval and maximum, then
// jittered over its upper half, so that operations pushed back together
// do not come due together.
func (c *Client) spread(d time.Duration) time.Duration {
	d = min(max(d, c.cfg.reconcileInterval), c.cfg.reconcileMax)
	return d/2 + rand.N(d/2+1)
}
