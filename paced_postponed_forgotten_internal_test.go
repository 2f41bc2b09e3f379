package idem

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem/journal"
)

// TestPassForgetsPostponedEntriesOnceDue: while a host stays paced, what
// postpone recorded for it is dropped by a visit or when pacing ends;
// an operation settled elsewhere (another replica's Run, Do, Confirm, a
// prune) is never visited here. A pass drops the entries already due
// (bringBack would have nothing to do for them but an Update each), and
// a host with none left, and keeps those still ahead.
func TestPassForgetsPostponedEntriesOnceDue(t *testing.T) {
	store, c := pacedFixture(t)
	now := c.cfg.clock.Now()
	later := now.Add(time.Hour)
	const paced, other = "127.0.0.1:1", "127.0.0.1:2"
	preparedDue(t, c, store, paced, "waiting", later)
	stalls := newHostStalls(8)
	stalls.share, stalls.maxRest = 8, c.cfg.reconcileMax
	// Their rests ended lately: paced still (unpace).
	stalls.rested(paced, now.Add(-time.Minute))
	stalls.rested(other, now.Add(-time.Minute))
	stalls.postponed[paced] = map[opID]time.Time{
		{DefaultScope, "waiting"}:           later,
		{DefaultScope, "settled-elsewhere"}: now.Add(-time.Minute), // journaled no more (pruned)
	}
	stalls.postponed[other] = map[opID]time.Time{{DefaultScope, "confirmed-elsewhere"}: now.Add(-time.Second)}
	if _, phase, err := c.pass(t.Context(), &runSchedule{}, stalls); err != nil {
		t.Fatalf("pass() = %v in %s", err, phase)
	}
	if got := stalls.postponed[paced]; len(got) != 1 || !got[opID{DefaultScope, "waiting"}].Equal(later) {
		t.Errorf("after a pass, postponed[%s] = %v; want only the one still ahead", paced, got)
	}
	if !stalls.pacedAlone(paced) || !stalls.pacedAlone(other) {
		t.Fatal("a pass ended the pacing of hosts whose rest ended a minute ago")
	}
	if got, ok := stalls.postponed[other]; ok {
		t.Errorf("after a pass, postponed[%s] = %v; want the host gone, none of its entries ahead", other, got)
	}
}

// pacedFixture is a Client on a fresh file journal, closed with the test.
func pacedFixture(t *testing.T) (*journal.Store, *Client) {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	c, err := New(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return store, c
}

// preparedDue journals an order for host under key, due at due.
func preparedDue(t *testing.T, c *Client, store *journal.Store, host, key string, due time.Time) {
	t.Helper()
	if _, err := c.Prepare(t.Context(), Request{Key: key, URL: "http://" + host + "/orders", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(t.Context(), DefaultScope, key, func(r *journal.Record) error { r.NextDue = due; return nil }); err != nil {
		t.Fatal(err)
	}
}
