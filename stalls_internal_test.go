package idem

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idem/journal"
)

// When a host answers again, Run makes due at once the operations it
// postponed for that host, but not one something rescheduled since: a
// server's Retry-After, or a drive's own schedule, must stand.
func TestBringBackLeavesRescheduledOperations(t *testing.T) {
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := New(store)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	later := c.cfg.clock.Now().Add(time.Hour)
	for _, key := range []string{"postponed", "rescheduled"} {
		if _, err := c.Prepare(t.Context(), Request{Key: key, URL: "http://127.0.0.1:1/orders", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Update(t.Context(), DefaultScope, key, func(r *journal.Record) error { r.NextDue = later; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	stalls := newHostStalls(1)
	stalls.postponed["127.0.0.1:1"] = map[opID]time.Time{
		{DefaultScope, "postponed"}:   later,
		{DefaultScope, "rescheduled"}: later.Add(-30 * time.Minute), // what postpone set, before a Retry-After moved it
	}
	stalls.back = []string{"127.0.0.1:1"}
	before := c.cfg.clock.Now()
	if err := c.bringBack(t.Context(), stalls); err != nil {
		t.Fatalf("bringBack() = %v", err)
	}
	rec, err := store.Get(t.Context(), DefaultScope, "postponed")
	if err != nil {
		t.Fatal(err)
	}
	if rec.NextDue.Before(before) || !rec.NextDue.Before(later) {
		t.Errorf("postponed: NextDue = %v; want now (%v)", rec.NextDue, before)
	}
	rec, err = store.Get(t.Context(), DefaultScope, "rescheduled")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.NextDue.Equal(later) {
		t.Errorf("rescheduled: NextDue = %v; want %v, unchanged", rec.NextDue, later)
	}
	if len(stalls.postponed) != 0 || len(stalls.back) != 0 {
		t.Errorf("after bringBack: postponed = %v, back = %v; want both empty", stalls.postponed, stalls.back)
	}
}

// Run takes a host for unreachable on silence only: no answer, or a
// gateway's or an unavailable server's. A host that answers about an
// operation without settling it (a query's 404, a 500) is there. A result
// endpoint on another host tells nothing of it. A host whose last answer
// is a 429 or 503 asks for rest. An attempt journaled and closed unsent
// (closeUnsent: another process flagged the operation between the
// resend's judgement and its commit, blockSince) was no exchange: taken
// for silence, a Run or Resume visit that sent nothing counted towards
// marking a host that answers unreachable (hostStalls), and hid the rest
// its 429 asked for.
func TestReachOf(t *testing.T) {
	old := journal.Attempt{Number: 1, Done: true, Status: 201} // before this drive
	for _, tc := range []struct {
		name        string
		statuses    []int // this drive's attempts, in order; -1: not done; -2: closed unsent
		queries     []int // which of them (indexes) are queries
		queriesHost bool  // the result endpoint is on the submit URL's host
		want        hostReach
		throttled   bool // throttleNews: the host asked this client to wait
	}{
		{"no exchange", nil, nil, true, reachNone, false},
		{"unfinished only", []int{-1}, nil, true, reachNone, false},
		{"refused", []int{0}, nil, true, reachSilent, false},
		{"gateways", []int{0, 502, 503, 504}, nil, true, reachSilent, false},
		{"unavailable last", []int{0, 503}, nil, true, reachSilent, true},
		{"query not found", []int{404}, []int{0}, true, reachAnswered, false},
		{"server error", []int{0, 500}, nil, true, reachAnswered, false},
		{"throttled", []int{429}, nil, true, reachAnswered, true},
		{"throttled, then answered", []int{429, 201}, nil, true, reachAnswered, false},
		{"throttled, then unfinished", []int{429, -1}, nil, true, reachAnswered, true},
		{"query throttled", []int{429}, []int{0}, true, reachAnswered, true},
		{"answered, then silent", []int{404, 0}, []int{0}, true, reachAnswered, false},
		{"query elsewhere refused", []int{0}, []int{0}, false, reachNone, false},
		{"query elsewhere throttled", []int{429}, []int{0}, false, reachNone, false},
		{"query elsewhere answered, submit refused", []int{404, 0}, []int{0}, false, reachSilent, false},
		{"query elsewhere refused, submit answered", []int{0, 201}, []int{0}, false, reachAnswered, false},
		{"closed unsent only", []int{-2}, nil, true, reachNone, false},
		{"refused, then closed unsent", []int{0, -2}, nil, true, reachSilent, false},
		{"throttled, then closed unsent", []int{429, -2}, nil, true, reachAnswered, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &journal.Record{Attempts: []journal.Attempt{old}}
			for i, st := range tc.statuses {
				a := journal.Attempt{Number: 2 + i, Kind: journal.AttemptSubmit, Done: st >= 0, Status: max(st, 0)}
				if slices.Contains(tc.queries, i) {
					a.Kind = journal.AttemptQuery
				}
				rec.Attempts = append(rec.Attempts, a)
				if st == -2 {
					a.Done = false
					rec.Attempts[len(rec.Attempts)-1] = a
					closeUnsent(rec, a.Number)
				}
			}
			if got := reachOf(rec, 1, tc.queriesHost); got != tc.want {
				t.Errorf("reachOf(%v) = %d; want %d", tc.statuses, got, tc.want)
			}
			var news hostNews
			throttleNews(&news, rec, 1, tc.queriesHost, time.Unix(1, 0))
			if got := !news.rest.IsZero(); got != tc.throttled {
				t.Errorf("throttleNews(%v) rests the host: %t; want %t", tc.statuses, got, tc.throttled)
			}
		})
	}
}
