package idem

import (
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idem/journal"
)

// A settle's write runs once per operation answered at once: the Result
// it journals is the submit's room (submitEnd.result), not an allocation
// of its own. The record still holds what the answer said, and the
// submitEnd, which the record's Result now keeps alive, holds nothing
// of the answer once its commit returns (driver.submit).
func TestSettleWriteAllocations(t *testing.T) {
	now := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	body := []byte(`{"state":"succeeded","resourceId":"ord_1"}`)
	end := &submitEnd{
		ex:      exchange{status: http.StatusCreated, header: http.Header{"Content-Type": {"application/json"}}, body: body, wrote: true},
		st:      step{judgment: judgment{move: moveSettle, label: "succeeded", out: Outcome{State: StateSucceeded, ResourceID: "ord_1"}}},
		number:  1,
		now:     now,
		updated: now,
	}
	fresh := func() *journal.Record {
		return &journal.Record{
			Scope: "s", Key: "k", Method: http.MethodPost, URL: "http://127.0.0.1/v1/orders",
			State: StatePending, Created: now, Updated: now,
			Attempts: []journal.Attempt{{Number: 1, Kind: journal.AttemptSubmit, Start: now}},
		}
	}
	r := fresh()
	if err := end.write(r); err != nil {
		t.Fatal(err)
	}
	if r.State != StateSucceeded || r.Result == nil || r.Result.ResourceID != "ord_1" ||
		r.Result.StatusCode != http.StatusCreated || string(r.Result.Body) != string(body) || !r.Settled.Equal(now) {
		t.Fatalf("settled record = %+v, result %+v", r, r.Result)
	}
	if r.Result != &end.result {
		t.Errorf("the settle's Result is not the submit's room")
	}
	if raceEnabled {
		t.Skip("allocation counts are not asserted under the race detector")
	}
	rs := make([]*journal.Record, 0, 101)
	for range cap(rs) {
		rs = append(rs, fresh())
	}
	i := 0
	n := testing.AllocsPerRun(100, func() {
		if err := end.write(rs[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if n != 0 {
		t.Errorf("a settle's write allocs = %v; want 0 (its Result is the submit's)", n)
	}
}
