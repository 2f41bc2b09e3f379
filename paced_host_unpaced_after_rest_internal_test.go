package idem

import (
	"testing"
	"time"
)

// TestPassEndsPacingLongAfterTheLastRest: a host that asked for rest
// once and was then visited fewer times in a row than its share (its
// operations settled elsewhere, or few of them) stayed paced, one visit
// at a time and an entry kept, for as long as Run ran. Once its last
// rest ended longer ago than any rest lasts (WithReconcile's maximum),
// when a 429 would be taken for a new throttle anyway, a pass ends its
// pacing and makes due what it postponed for it; a host whose rest ended
// lately stays paced.
func TestPassEndsPacingLongAfterTheLastRest(t *testing.T) {
	store, c := pacedFixture(t)
	const stale, recent = "127.0.0.1:1", "127.0.0.1:2"
	now := c.cfg.clock.Now()
	later := now.Add(30 * time.Minute)
	preparedDue(t, c, store, stale, "order-1", later)
	stalls := newHostStalls(8)
	stalls.share, stalls.maxRest = 8, c.cfg.reconcileMax
	stalls.rested(stale, now.Add(-c.cfg.reconcileMax-time.Minute))
	stalls.rested(recent, now.Add(-10*time.Minute))
	stalls.postponed[stale] = map[opID]time.Time{{DefaultScope, "order-1"}: later}
	if _, phase, err := c.pass(t.Context(), &runSchedule{}, stalls); err != nil {
		t.Fatalf("pass() = %v in %s", err, phase)
	}
	if stalls.pacedAlone(stale) {
		t.Errorf("%s, its last rest over %v ago, is still paced; want its share of visits at once", stale, c.cfg.reconcileMax+time.Minute)
	}
	if !stalls.pacedAlone(recent) {
		t.Errorf("%s, its rest over 10m ago, is paced no more; want paced until its share of answers in a row", recent)
	}
	rec, err := store.Get(t.Context(), DefaultScope, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.NextDue.Before(later) || len(stalls.postponed) != 0 {
		t.Errorf("NextDue %v from now, postponed = %v; want due now, nothing postponed left", rec.NextDue.Sub(now), stalls.postponed)
	}
}

// A host whose pacing ends while it looks unreachable keeps its backlog
// postponed: made due at once, it was claimed again, one operation
// probed and the rest postponed again, two writes more each for nothing;
// the host's first answer brings them back (visited).
func TestPassEndsPacingOfADownHostWithoutBringingBackItsBacklog(t *testing.T) {
	store, c := pacedFixture(t)
	const host = "127.0.0.1:1"
	now := c.cfg.clock.Now()
	later := now.Add(30 * time.Minute)
	preparedDue(t, c, store, host, "order-1", later)
	stalls := newHostStalls(8)
	stalls.share, stalls.maxRest = 8, c.cfg.reconcileMax
	stalls.rested(host, now.Add(-c.cfg.reconcileMax-time.Minute))
	stalls.down[host] = now.Add(-c.cfg.reconcileMax)
	stalls.postponed[host] = map[opID]time.Time{{DefaultScope, "order-1"}: later}
	if _, phase, err := c.pass(t.Context(), &runSchedule{}, stalls); err != nil {
		t.Fatalf("pass() = %v in %s", err, phase)
	}
	if stalls.pacedAlone(host) {
		t.Errorf("%s, its last rest over %v ago, is still paced", host, c.cfg.reconcileMax+time.Minute)
	}
	rec, err := store.Get(t.Context(), DefaultScope, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.NextDue.Equal(later) || len(stalls.postponed[host]) != 1 {
		t.Errorf("NextDue %v from now, postponed = %v; want %v from now, still postponed while the host is down", rec.NextDue.Sub(now), stalls.postponed, later.Sub(now))
	}
}
