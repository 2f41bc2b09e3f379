package idem

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/journal"
)

// The default retry budget of each host, in the manner of gRPC's retry
// throttling: every failed attempt costs a token, every success earns back
// a fraction of one, and retries stop while the bucket is at or below half.
const (
	DefaultRetryTokens     = 100.0
	DefaultRetryTokenRatio = 0.1
)

// maxBudgetHosts bounds the hosts whose buckets are kept apart. Only a
// bucket below full takes room (a full one is the same as none), but a
// bucket refills only by its host's successes: a host that failed once
// and was never called again (one per merchant, for months) stays below
// full for good. So a host failing with no room takes the place of the
// fullest bucket kept, if that one is above half and has not changed for
// budgetStale (evictFullest). The
// host dropped then reads the shared bucket, as every host not kept does
// once the new one fills the slot: full, allowing retries as the bucket
// dropped did, unless every bucket kept has been at or below half (that
// many hosts failing at once) since the hosts last filled. Only then do
// the hosts beyond share a bucket below full, which can refuse a retry
// to one of them for the others' failures, as the single client-wide
// bucket did for every host.
const maxBudgetHosts = 1024

// budgetStale is how long a bucket kept must have gone unchanged before
// a host failing with no room may take its place. In an outage wider
// than maxBudgetHosts every bucket is live: one evicted came back full
// less a token and evicted another just as live, and the buckets swapped
// round and never drained to half, allowing retries the budget is there
// to stop; unevicted, the hosts past them share the overflow bucket,
// which drains with them. An hour is far longer than a host carrying
// traffic goes between failures while it is down (retries back off
// seconds to minutes), and short enough that a merchant's host that
// failed once and was never called again makes room the same day. Not
// WithReconcile's maximum interval: the reconciler spends no budget, so
// its pace says nothing of a bucket's, and one set to seconds would
// bring the swapping back.
const budgetStale = time.Hour

// retryBudget stops a fleet of clients from multiplying load on a
// struggling server. It is kept per host (Client.hostOf): an outage at one
// provider drains that provider's bucket and leaves retries to the others
// alone. First attempts never consult it. A nil budget allows everything.
type retryBudget struct {
	mu       sync.Mutex
	max      float64                 // a bucket's size; 0 disables the budget
	ratio    float64                 // what a success earns back
	now      func() time.Time        // the Client's clock (budgetStale)
	hosts    map[string]budgetBucket // each host whose bucket is below full
	overflow float64                 // tokens of the shared bucket past maxBudgetHosts
	// noEvictBefore is when a bucket kept may first be stale, as
	// evictFullest last found none: until then a wide outage's failures
	// past maxBudgetHosts skip the scan of the buckets.
	noEvictBefore time.Time
	// low counts the buckets below full, kept and shared: while it is
	// zero, as it is on a good day, a success has nothing to earn back,
	// and the caller need not even name the host (anyLow).
	low atomic.Int32
}

// budgetBucket is a kept host's bucket: its tokens, and when they last
// changed by the Client's clock, monotonic where it has one.
type budgetBucket struct {
	tokens  float64
	changed time.Time
}

func newRetryBudget(maxTokens, ratio float64, now func() time.Time) *retryBudget {
	return &retryBudget{max: maxTokens, ratio: ratio, now: now, overflow: maxTokens, hosts: make(map[string]budgetBucket)}
}

// allowRetry reports whether a retry to host may go now.
func (b *retryBudget) allowRetry(host string) bool {
	if b.max == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokensLocked(host) > b.max/2
}

// failure records an attempt to host that did not settle the operation.
func (b *retryBudget) failure(host string) { b.add(host, -1) }

// success records an attempt to host that got a conclusive answer.
func (b *retryBudget) success(host string) { b.add(host, b.ratio) }

// anyLow reports whether a bucket is below full: if not, a success can
// be left unrecorded. It takes no lock.
func (b *retryBudget) anyLow() bool { return b.low.Load() > 0 }

func (b *retryBudget) add(host string, d float64) {
	if b.max == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.count()
	bk, kept := b.hosts[host]
	t := bk.tokens
	shared := !kept && len(b.hosts) >= maxBudgetHosts
	if shared && d < 0 {
		shared = !b.evictFullest()
	}
	switch {
	case kept:
	case shared:
		b.overflow = min(b.max, max(0, b.overflow+d))
		return
	case d >= 0:
		return // a full bucket stays full
	default:
		t = b.max
	}
	t = min(b.max, max(0, t+d))
	if t == b.max {
		delete(b.hosts, host)
		return
	}
	b.hosts[host] = budgetBucket{tokens: t, changed: b.now()}
}

// evictFullest forgets the fullest bucket kept, under mu, if it is above
// half and unchanged for budgetStale: in an outage as wide as the hosts
// kept, none is, and the failing host reads the shared bucket. The host
// forgotten then reads the shared bucket (tokensLocked) once the
// failing host fills the slot: full, so that it allows a retry as it
// did, unless every bucket kept has been at or below half since the
// hosts last filled. It reports whether it made room.
func (b *retryBudget) evictFullest() bool {
	now := b.now()
	if now.Before(b.noEvictBefore) {
		return false
	}
	// A bucket at or below half, or new, is stale no sooner than
	// budgetStale from now: it goes above half, or in, only by a change.
	victim, most, oldest := "", b.max/2, now
	for h, bk := range b.hosts {
		if bk.tokens <= b.max/2 {
			continue
		}
		if now.Sub(bk.changed) < budgetStale {
			if bk.changed.Before(oldest) {
				oldest = bk.changed
			}
			continue
		}
		if bk.tokens > most {
			victim, most = h, bk.tokens
		}
	}
	if victim == "" {
		b.noEvictBefore = oldest.Add(budgetStale)
		return false
	}
	delete(b.hosts, victim)
	return true
}

// count updates low, under mu. The shared bucket is full again once the
// hosts have room of their own: a host failing then gets its own bucket,
// and a later crowd starts from full, not from the last one's level.
func (b *retryBudget) count() {
	if len(b.hosts) < maxBudgetHosts {
		b.overflow = b.max
	}
	n := len(b.hosts)
	if b.overflow < b.max {
		n++
	}
	b.low.Store(int32(n))
}

// tokensLocked is what host's bucket holds: its own, or the shared one
// once maxBudgetHosts others are kept, or a full one.
func (b *retryBudget) tokensLocked(host string) float64 {
	if bk, ok := b.hosts[host]; ok {
		return bk.tokens
	}
	if len(b.hosts) >= maxBudgetHosts {
		return b.overflow
	}
	return b.max
}

// level returns the tokens of the host that holds least (a full bucket
// when none is below full), the size of a bucket, and the hosts whose
// bucket is below full, with their tokens.
func (b *retryBudget) level() (lowest, size float64, hosts map[string]float64) {
	if b.max == 0 {
		return 0, 0, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	lowest = b.max
	if len(b.hosts) >= maxBudgetHosts {
		lowest = b.overflow
	}
	hosts = make(map[string]float64, len(b.hosts))
	for h, bk := range b.hosts {
		hosts[h] = bk.tokens
		lowest = min(lowest, bk.tokens)
	}
	return lowest, b.max, hosts
}

// budgetSuccess records a conclusive answer about rec in its host's retry
// budget. Only while a budget is below full does it name the host, which
// costs a string: a good day's answers take neither that nor a lock.
func (c *Client) budgetSuccess(rec *journal.Record) {
	if c.budget.anyLow() {
		c.budget.success(c.hostOf(rec))
	}
}
