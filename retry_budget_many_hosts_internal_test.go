package idem

import (
	"fmt"
	"testing"
	"time"
)

// TestRetryBudgetNewHostsPastStaleOnes: a service calling one host per
// merchant for months, at the default budget (100 tokens, 0.1 a
// success). 1,024 merchants' hosts each had one failed attempt and were
// never called again: their buckets, at 99, never refill. Then one new
// merchant's host has an outage (50 failures: at half, its retries
// stop), and another new host fails once. Before: both shared the
// overflow bucket, drained to 50 by the first's outage, and the second
// was refused its retry (its operation ended unknown, for the
// reconciler, instead of retried). Now each new host takes the place of
// a stale bucket above half (unchanged for budgetStale by the Client's
// clock), read as full once forgotten.
func TestRetryBudgetNewHostsPastStaleOnes(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	b := newRetryBudget(DefaultRetryTokens, DefaultRetryTokenRatio, func() time.Time { return at })
	for i := range maxBudgetHosts {
		b.failure(fmt.Sprintf("shop-%04d.example", i))
	}
	at = at.Add(budgetStale)
	for range 50 {
		b.failure("down.example")
	}
	b.failure("up.example")
	if b.allowRetry("down.example") {
		t.Error("a host 50 failures down: retry allowed; want refused (at half)")
	}
	if !b.allowRetry("up.example") {
		t.Error("a host 1 failure down: retry refused for another host's outage")
	}
	if !b.allowRetry("shop-0000.example") {
		t.Error("a stale host above half: retry refused")
	}
	if n := len(b.hosts); n > maxBudgetHosts {
		t.Errorf("%d buckets kept; want at most %d", n, maxBudgetHosts)
	}
	if got := b.tokensLocked("up.example"); got != DefaultRetryTokens-1 {
		t.Errorf("new host's bucket = %v; want %v", got, DefaultRetryTokens-1)
	}
}

// TestRetryBudgetHoldsInAWideOutage: more hosts than maxBudgetHosts fail
// together (a shared provider down behind many merchants' hosts), at the
// default budget, each failing 99 times, one failure per host in turn.
// Before: a failing host with no bucket evicted the fullest one above
// half, which was just as live (99, one failure in); the evicted host
// came back at 99 and evicted another: the buckets swapped round and
// never drained, and 84 of 1,100 hosts (1,091 of 2,048) still allowed
// retries. Now a bucket changed within budgetStale is never evicted:
// the hosts past maxBudgetHosts share the overflow bucket, which drains
// to half with them, and no host allows a retry.
func TestRetryBudgetHoldsInAWideOutage(t *testing.T) {
	for _, n := range []int{maxBudgetHosts + 76, 2 * maxBudgetHosts} {
		// The clock stands still: the outage is live throughout.
		at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		b := newRetryBudget(DefaultRetryTokens, DefaultRetryTokenRatio, func() time.Time { return at })
		for range int(DefaultRetryTokens) - 1 {
			for i := range n {
				b.failure(fmt.Sprintf("shop-%04d.example", i))
			}
		}
		allowed := 0
		for i := range n {
			if b.allowRetry(fmt.Sprintf("shop-%04d.example", i)) {
				allowed++
			}
		}
		if allowed != 0 {
			t.Errorf("%d hosts failing 99 times each: %d still allow a retry; want 0", n, allowed)
		}
		if len(b.hosts) > maxBudgetHosts {
			t.Errorf("%d buckets kept; want at most %d", len(b.hosts), maxBudgetHosts)
		}
	}
}

// TestRetryBudgetEvictsOnlyPastTheStaleBound: 1,024 hosts failed once an
// hour ago, less a nanosecond; a new host failing shares the overflow
// bucket and evicts none. A nanosecond on (budgetStale since the last
// change), the next new host takes a stale one's place, though the
// first found none and the budget skips the scan until then.
func TestRetryBudgetEvictsOnlyPastTheStaleBound(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	b := newRetryBudget(DefaultRetryTokens, DefaultRetryTokenRatio, func() time.Time { return at })
	for i := range maxBudgetHosts {
		b.failure(fmt.Sprintf("shop-%04d.example", i))
	}
	at = at.Add(budgetStale - time.Nanosecond)
	b.failure("early.example")
	if _, kept := b.hosts["early.example"]; kept {
		t.Error("a host failing within the hour of the others' change: took a bucket's place; want the shared bucket")
	}
	if b.overflow != DefaultRetryTokens-1 {
		t.Errorf("shared bucket = %v; want %v", b.overflow, DefaultRetryTokens-1)
	}
	at = at.Add(time.Nanosecond)
	b.failure("late.example")
	if _, kept := b.hosts["late.example"]; !kept {
		t.Error("a host failing an hour after the others' change: not kept; want a stale bucket's place")
	}
	if n := len(b.hosts); n != maxBudgetHosts {
		t.Errorf("%d buckets kept; want %d", n, maxBudgetHosts)
	}
}
