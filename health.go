package idem

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/idemkit/idem/journal"
)

// Health is a snapshot of the background reconciler (Run) and of the
// journal errors it met, for a readiness probe, an admin handler or a
// metric. Times are read from the Client's clock.
//
// A journal error Run can outlive (a full disk, a failed write or fsync)
// makes it wait and try again: ConsecutiveErrors is then above zero and
// RetryAt says when. One it cannot (a damaged journal, one written by a
// newer idem, a journal closed under the Client) ends Run: RunActive turns
// false and RunErr says why.
type Health struct {
	// RunActive: a Run call is in progress.
	RunActive bool
	// LastPass is when Run last finished a pass over the due operations
	// without a journal error; zero before the first.
	LastPass time.Time
	// ConsecutiveErrors counts Run's passes in a row that met a journal
	// error. It is back to zero after the first clean pass.
	ConsecutiveErrors int
	// LastJournalError is the last journal error Run met, kept after a
	// recovery (compare LastJournalErrorAt with LastPass); nil if none.
	// errors.Is finds its cause (syscall.ENOSPC, journal.ErrCorrupt).
	LastJournalError error
	// LastJournalErrorAt is when Run met LastJournalError.
	LastJournalErrorAt time.Time
	// RetryAt is when Run tries again after a failed pass; zero while
	// passes succeed.
	RetryAt time.Time
	// RunErr is why the last Run call returned (its context ended, the
	// Client was closed, the journal is unusable); nil while Run is active
	// or before any Run call has returned.
	RunErr error
	// Hosts are the hosts whose operations Run cannot get an answer
	// about, that answer it slowly, or that asked it to wait, as its
	// last pass left them (and a host its pass under way took for slow):
	// at most HealthMaxHosts, those taken for unreachable first, then
	// the longest failing, then the longest slow, then those only
	// resting. Empty when every host Run visited answered promptly, and
	// before Run's first pass. A host here does not make Run unhealthy:
	// its operations stay journaled and due, and settle once the host
	// answers.
	Hosts []HostHealth
	// HostsOmitted counts the hosts in trouble beyond HealthMaxHosts,
	// left out of Hosts.
	HostsOmitted int
}

// HealthMaxHosts bounds Health.Hosts: an outage of a thousand hosts
// (one per merchant, say) must not make every probe copy a thousand
// entries.
const HealthMaxHosts = 32

// HostHealth is what Run knows of one host (host and port of the
// operations' URLs) that it cannot reach, that answers it slowly, or
// that asked it to wait.
type HostHealth struct {
	Host string
	// FailedVisits counts Run's visits in a row to the host that got no
	// answer from it, or only 502, 503 or 504 (or a CDN's 52x for its
	// origin, as Cloudflare's): a connection refused or timed out, a
	// gateway with nothing behind it. A 429 is an answer: zero for a host
	// that only throttles.
	FailedVisits int
	// FailingSince is when the first of those visits ended: for about
	// that long every operation for the host has been failing.
	FailingSince time.Time
	// LastFailedVisit is when the last of them ended. Long ago, with the
	// host not down, it says Run has had nothing for the host since
	// (its operations settled otherwise, or by hand).
	LastFailedVisit time.Time
	// DownSince is when Run took the host for unreachable (a streak of
	// twice WithResumeConcurrency failed visits, and at least 8: 16 by
	// default): since then it probes
	// the host with one operation a pass and postpones the others. Zero
	// if it has not.
	DownSince time.Time
	// SlowSince is when Run took the host for slow: its visits held
	// their whole share of Run's workers (WithResumeConcurrency) and
	// none ended for about a quarter of the attempt timeout (at most
	// 5s), though the host answers in the end (an acquirer that holds
	// each request for seconds). Run then pushes the host's waiting
	// operations back to its pace. It stays so until a pass of Run
	// visits the host and does not take it for slow, or nothing of the
	// host waits any more: the pass that took it for slow settled every
	// operation of it that was due, or the last one it pushed back has
	// fallen due. Zero if it is not slow, and for a host whose last
	// visits got no answer (FailingSince): one that holds requests until
	// they time out looks slow only until they do.
	SlowSince time.Time
	// RestUntil is when the wait the host asked for (429 or 503 with a
	// Retry-After, bounded by WithReconcile's maximum) ends, or Run's
	// backoff after a 429 that named no wait: Run sends it nothing
	// before then. Zero if none is pending.
	RestUntil time.Time
}

// Health reports the state of the background reconciler. It is safe to call
// at any time, also after Close, and costs one mutex: an admin handler or a
// probe may call it on every request. On a nil Client (Open's result
// after its error) RunErr says so.
func (c *Client) Health() Health {
	if c == nil {
		return Health{RunErr: errUnmade}
	}
	h := &c.life.health
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.h
	out.RunActive = h.runs > 0
	// Copied: the caller may change what it got, and other callers hold
	// the same snapshot.
	out.Hosts = slices.Clone(h.h.Hosts)
	return out
}

// healthState is what Health reports, updated by Run.
type healthState struct {
	mu   sync.Mutex
	runs int // Run calls in progress: "one per Client" is advice, not enforced
	h    Health
	// since is when the current streak of failed passes began.
	since time.Time
}

func (h *healthState) runStarted() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs++
	h.h.RunErr = nil
	if h.runs == 1 {
		// A new Run has failed no pass yet; the last error stays on record.
		h.h.ConsecutiveErrors, h.since = 0, time.Time{}
		// Nor has it visited any host: the last Run's findings are its own.
		h.h.Hosts, h.h.HostsOmitted = nil, 0
	}
}

// hostsSeen records what Run's pass left of the hosts in trouble
// (hostStalls.report); hosts is Health's from now on, never changed.
func (h *healthState) hostsSeen(hosts []HostHealth, omitted int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.h.Hosts, h.h.HostsOmitted = hosts, omitted
}

func (h *healthState) runEnded(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs--
	h.h.RetryAt = time.Time{}
	h.h.RunErr = err
}

// failed records a failed pass and returns the streak's length and start.
func (h *healthState) failed(err error, now, retry time.Time) (n int, since time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.ConsecutiveErrors == 0 {
		h.since = now
	}
	h.h.ConsecutiveErrors++
	h.h.LastJournalError, h.h.LastJournalErrorAt = err, now
	h.h.RetryAt = retry
	return h.h.ConsecutiveErrors, h.since
}

// stopped records the error that ended Run for good.
func (h *healthState) stopped(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.h.ConsecutiveErrors++
	h.h.LastJournalError, h.h.LastJournalErrorAt = err, now
}

// passed records a clean pass and returns the streak of failed passes it
// ended (0 if none) and when that began.
func (h *healthState) passed(now time.Time) (n int, since time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, since = h.h.ConsecutiveErrors, h.since
	h.h.ConsecutiveErrors = 0
	h.h.RetryAt = time.Time{}
	h.h.LastPass = now
	return n, since
}

// permanentJournalErr tells a journal Run cannot outlive from a failure
// that may pass (a full disk, an I/O error): retrying a damaged file, one
// from a newer idem, or a closed or read-only journal would fail the same
// way for ever, and each attempt may send a result query whose answer
// cannot be kept. What is not known to be permanent is retried: stopping
// on a passing fault is what left operations open until a restart.
func permanentJournalErr(err error) bool {
	for _, p := range []error{journal.ErrCorrupt, journal.ErrVersion, journal.ErrClosed, journal.ErrReadOnly, journal.ErrFileFailed} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
