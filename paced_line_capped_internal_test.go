package idem

import (
	"testing"
	"time"
)

// TestPacedPlaceCappedAtRunsLongestInterval: a paced host's line grows
// by a step for each share of its backlog (nextSlot); a place further
// ahead than Run's longest interval (WithReconcile's maximum, an hour by
// default) is one the hourly reschedule takes for a clock stepped back:
// it makes the operation due at once, two writes more, and warns of a
// step that never was. postpone puts such an operation at the cap.
func TestPacedPlaceCappedAtRunsLongestInterval(t *testing.T) {
	store, c := pacedFixture(t)
	const host = "127.0.0.1:1"
	now := c.cfg.clock.Now()
	preparedDue(t, c, store, host, "order-1", now)
	claimed, err := store.ClaimDue(t.Context(), c.cfg.owner, now.Add(time.Second), now.Add(time.Minute), 1)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimDue() = %d claimed, %v; want 1", len(claimed), err)
	}
	stalls := newHostStalls(8)
	stalls.share, stalls.maxRest = 8, c.cfg.reconcileMax
	stalls.rested(host, now.Add(time.Second))
	// A backlog of thousands queued before it, its share a second.
	stalls.paced[host].slot = pacedSlot{at: now.Add(3 * time.Hour), n: stalls.share}
	refs := []ref{{scope: DefaultScope, key: "order-1", lease: claimed[0].Lease, host: host}}
	if err := c.postpone(t.Context(), refs, stalls); err != nil {
		t.Fatalf("postpone() = %v", err)
	}
	rec, err := store.Get(t.Context(), DefaultScope, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.scheduledTooFar(rec, c.cfg.clock.Now()) || rec.NextDue.After(now.Add(c.cfg.reconcileMax).Add(time.Second)) {
		t.Errorf("postponed to %v from now; want at most WithReconcile's maximum, %v", rec.NextDue.Sub(now), c.cfg.reconcileMax)
	}
	if !rec.NextDue.After(now.Add(time.Second)) {
		t.Errorf("postponed to %v from now; want past the rest's end", rec.NextDue.Sub(now))
	}
}
