package idem

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idemkit/idem/journal"
)

// runWorkers is how many visits Run and Resume make at once, across
// hosts: twice WithResumeConcurrency, which bounds the visits to one host
// (its share). A host that answers, but slowly, within the attempt
// timeout (an acquirer's authorisation that takes seconds, a result
// endpoint that stalls), is neither silent nor throttling, so hostStalls
// never hands it off; with every worker its own, its backlog would hold
// up every other host's operations, which their servers would settle at
// once, for as long as the backlog lasts: hours for Run, and as long for
// a start-up that waits for Resume. Twice, not half: a service that
// calls one provider still reconciles WithResumeConcurrency at a time,
// and no server sees more visits at once than it did.
func runWorkers(share int) int { return 2 * share }

// Bounds of stallAfter.
const (
	minStall = 10 * time.Millisecond
	maxStall = 5 * time.Second
)

// stallAfter is how long a pass of Run, or Resume, lets a host that holds
// its whole share of workers go without a visit ending before it takes
// the host for slow (visitFair): a quarter of an exchange's timeout, so
// that the other hosts' operations are reached long before the slow
// host's exchanges time out. It is measured on a ticker, as the attempt
// timeout is on a timer: the Client's clock may not move while a pass
// waits.
func (c *Client) stallAfter() time.Duration {
	return min(max(c.cfg.attemptTimeout/4, minStall), maxStall)
}

// visitFair drives refs, first and then those claim returns, at most
// twice WithResumeConcurrency at a time and at most WithResumeConcurrency
// of them to one host, an overdue ref aside (its visit sends nothing),
// with mode (Resume's or Run's). It hands each outcome to done, one call
// at a time, and starts no visit once done returns false or ctx ends; it
// returns when every visit it started has ended. It starts none for a ref
// that skip (if not nil) names, asked after every earlier outcome that
// reached done before it; skip may also set the ref's brief.
//
// A ref whose host holds its whole share waits for a visit to that host
// to end, while refs of other hosts behind it go first. A host that holds
// its share and sees none end for stallAfter is taken for slow, for the
// rest of the call, and logged. For a pass of Run, its waiting refs, and
// those claimed for it later while it holds its share, go to aside
// (which gives them up: their claim would only keep other replicas off
// them). And every half stallAfter while visits last, unless refs of
// other hosts wait their turn, claim is asked for more, so that the other
// hosts' due operations are reached, those falling due meanwhile
// included. A slow host keeps its share busy with the refs claimed for
// it. claim returns the refs it claimed, and whether it claimed a whole
// batch (more may be due); nothing once it or a push-back fails (the
// pass records why). tick is called on each of those ticks, before
// claim, with the hosts taken for slow on it, as skip and done are: one
// at a time with them. Resume, which visits every operation it found
// and no other, passes none of the three: a slow host's refs wait their
// turn, each visited once.
//
// A host that alone (if not nil) names, asked as skip is, gets one visit
// at a time: its share is one (pacedAlone).
func (c *Client) visitFair(ctx context.Context, mode driveMode, first []ref, claim func() ([]ref, bool), aside func([]ref), tick func(slowed []string), alone func(host string) bool, skip func(*ref) bool, done func(ref, *Result, hostNews, error) bool) {
	if len(first) == 0 {
		return
	}
	v := &visitor{c: c, ctx: ctx, mode: mode, skip: skip, done: done}
	share := c.cfg.resumeConcurrency
	workers := runWorkers(share)
	jobs, ended := make(chan ref), make(chan ref)
	var wg sync.WaitGroup
	defer func() {
		close(jobs)
		wg.Wait()
	}()
	ticker := time.NewTicker(c.stallAfter() / 2)
	defer ticker.Stop()
	busy, spawned := 0, 0
	inflight := map[string]int{}
	quiet := map[string]int{} // ticks since a visit to the host started from none or ended
	slow := map[string]bool{}
	full := func(host string) bool {
		n := inflight[host]
		if n >= share {
			return true
		}
		if n == 0 || alone == nil {
			return false
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		return alone(host)
	}
	var queue fairQueue
	setAside := func() {
		if aside == nil {
			return
		}
		if set := queue.take(func(host string) bool { return slow[host] && full(host) }); len(set) > 0 {
			aside(set)
		}
	}
	queue.push(first)
	for {
		if v.stopped() {
			queue.clear() // unvisited: the pass gives them up
		}
		for busy < workers {
			r, ok := queue.next(full)
			if !ok {
				break
			}
			if busy == spawned {
				spawned++
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range jobs {
						v.run(r)
						ended <- r
					}
				}()
			}
			jobs <- r
			busy++
			if inflight[r.host]++; inflight[r.host] == 1 {
				delete(quiet, r.host)
			}
		}
		if busy == 0 {
			return // nothing waits: a host with no visit under way has room
		}
		select {
		case r := <-ended:
			busy--
			if inflight[r.host]--; inflight[r.host] == 0 {
				delete(inflight, r.host)
			}
			delete(quiet, r.host)
		case <-ticker.C:
			if v.stopped() {
				continue
			}
			var slowed []string
			for host := range inflight {
				if !full(host) {
					continue
				}
				if quiet[host]++; quiet[host] >= 2 && !slow[host] {
					slow[host] = true
					slowed = append(slowed, host)
					msg := "idem: reconciler: a host answers slowly; its other due operations are pushed back to its pace"
					if mode == resuming {
						msg = "idem: resume: a host answers slowly; its operations wait their turn while the other hosts' go on"
					}
					c.log.LogAttrs(ctx, slog.LevelInfo, msg,
						// Its own limit: one for a paced host (alone), not the share.
						slog.String("host", host), slog.Int("visits_at_once", inflight[host]), slog.Duration("no_answer_for", c.stallAfter()))
				}
			}
			if tick != nil {
				v.mu.Lock()
				tick(slowed)
				v.mu.Unlock()
			}
			// A whole claim set aside says more of the slow hosts'
			// backlog is due before any other host's: claim on at once.
			for setAside(); queue.len() == 0 && claim != nil && !v.stopped(); {
				got, whole := claim()
				queue.push(got)
				if setAside(); !whole {
					break
				}
			}
		}
	}
}

// fairQueue holds the refs visitFair has yet to start, in the order they
// came, one line per host, the lines in a heap by their first ref's
// order: next looks at the heads of the earliest lines only, passing
// over those of full hosts (at most two: the busy workers are twice a
// share), and takes a ref without moving the others. Resume queues every
// open operation at once, and a scan of the whole queue, or a copy of it,
// on every start was quadratic in them: seconds for ten thousand, of one
// host or of as many. The zero value is empty.
type fairQueue struct {
	seq   int                  // refs pushed so far: their order
	lines map[string]*hostLine // by host; none empty
	heads lineHeap             // the lines, earliest first ref first
	free  []queuedRef          // overdue refs: their visits send nothing, and wait for no share
	n     int
}

// queuedRef is a ref in a fairQueue, numbered in the order it came.
type queuedRef struct {
	ref
	seq int
}

// hostLine is one host's refs in a fairQueue, in order.
type hostLine struct {
	host string
	refs []queuedRef
}

// lineHeap orders host lines by their first ref (container/heap).
type lineHeap []*hostLine

func (h lineHeap) Len() int           { return len(h) }
func (h lineHeap) Less(i, j int) bool { return h[i].refs[0].seq < h[j].refs[0].seq }
func (h lineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lineHeap) Push(x any)        { *h = append(*h, x.(*hostLine)) }
func (h *lineHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	*h = old[:len(old)-1]
	return l
}

func (q *fairQueue) len() int { return q.n }

func (q *fairQueue) push(refs []ref) {
	if q.lines == nil {
		q.lines = map[string]*hostLine{}
	}
	for _, r := range refs {
		qr := queuedRef{r, q.seq}
		q.seq++
		q.n++
		if r.overdue {
			q.free = append(q.free, qr)
			continue
		}
		l := q.lines[r.host]
		if l == nil {
			l = &hostLine{host: r.host}
			q.lines[r.host] = l
			l.refs = append(l.refs, qr)
			heap.Push(&q.heads, l)
			continue
		}
		l.refs = append(l.refs, qr) // behind its head: the heap holds
	}
}

// next takes the first ref whose host is not full, or an overdue one if
// that came first; false if there is none.
func (q *fairQueue) next(full func(host string) bool) (ref, bool) {
	var parked []*hostLine
	defer func() {
		for _, l := range parked {
			heap.Push(&q.heads, l)
		}
	}()
	for len(q.heads) > 0 {
		l := q.heads[0]
		if len(q.free) > 0 && q.free[0].seq < l.refs[0].seq {
			break
		}
		if full(l.host) {
			parked = append(parked, heap.Pop(&q.heads).(*hostLine))
			continue
		}
		r := l.refs[0].ref
		q.n--
		if l.refs = l.refs[1:]; len(l.refs) == 0 {
			heap.Pop(&q.heads)
			delete(q.lines, l.host)
		} else {
			heap.Fix(&q.heads, 0)
		}
		return r, true
	}
	if len(q.free) == 0 {
		return ref{}, false
	}
	r := q.free[0].ref
	q.free = q.free[1:]
	q.n--
	return r, true
}

// take removes and returns the refs of every host that names, each
// host's in order; overdue refs stay.
func (q *fairQueue) take(names func(host string) bool) []ref {
	var out []ref
	for h, l := range q.lines {
		if !names(h) {
			continue
		}
		for _, qr := range l.refs {
			out = append(out, qr.ref)
		}
		q.n -= len(l.refs)
		delete(q.lines, h)
	}
	if len(out) > 0 {
		q.heads = q.heads[:0]
		for _, l := range q.lines {
			q.heads = append(q.heads, l)
		}
		heap.Init(&q.heads)
	}
	return out
}

// clear empties q.
func (q *fairQueue) clear() {
	clear(q.lines)
	q.heads, q.free, q.n = nil, nil, 0
}

// pushBack gives up the claims of refs, which a pass of Run set aside
// because their host is slow (visitFair), after moving their NextDue to
// about when the host's share of workers reaches them: the k-th set aside
// for a host this pass (counted in byHost) after k/WithResumeConcurrency
// rounds of an exchange's timeout, within WithReconcile's interval and
// maximum, jittered; until records, per host, when the last of them
// falls due. The next claims then reach the other hosts' due operations
// instead of the same backlog, and the slow host's come back at the pace
// it takes them. Only NextDue changes, under the pass's lease, and only
// later: nothing about the operation is decided. It returns the first
// journal error, and moves no more after it; an operation it did not
// move is still given up, and stays due.
func (c *Client) pushBack(ctx context.Context, refs []ref, byHost map[string]int, until map[string]time.Time) error {
	// Unbounded, as postpone's moves: a batch cut short by a bound of its
	// own would be no journal error to report.
	wctx := context.WithoutCancel(ctx)
	now := c.cfg.clock.Now()
	share := c.cfg.resumeConcurrency
	var first error
	for _, r := range refs {
		if first != nil {
			// A journal that fails one write (a stalled database waits a
			// call timeout for each) would fail the rest as slowly:
			// those stay due, given up below.
			break
		}
		rounds := time.Duration(byHost[r.host]/share + 1)
		byHost[r.host]++
		wait := c.cfg.reconcileMax
		if c.cfg.attemptTimeout < wait/rounds {
			wait = rounds * c.cfg.attemptTimeout
		}
		due := now.Add(c.spread(wait))
		rec, err := c.moveDue(journal.WithLease(wctx, r.lease), r.scope, r.key, func(rec *journal.Record) (time.Time, bool) {
			return due, rec.NextDue.Before(due)
		})
		if err != nil {
			first = fmt.Errorf("idem: reconcile: push back: %w", err)
		}
		if rec != nil && rec.NextDue.After(until[r.host]) {
			until[r.host] = rec.NextDue
		}
	}
	rctx, cancel := c.releasesContext(ctx)
	defer cancel()
	for _, r := range refs {
		// A failure only leaves the lease to expire.
		_ = c.store.Release(rctx, r.lease)
	}
	if len(refs) > 0 {
		c.log.LogAttrs(ctx, slog.LevelDebug, "idem: reconciler: pushed back the operations of a slow host", slog.Int("count", len(refs)))
	}
	return first
}
