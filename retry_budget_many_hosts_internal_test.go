package idem

import (
	"fmt"
	"testing"
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
// a stale bucket above half, read as full once forgotten.
func TestRetryBudgetNewHostsPastStaleOnes(t *testing.T) {
	b := newRetryBudget(DefaultRetryTokens, DefaultRetryTokenRatio)
	for i := range maxBudgetHosts {
		b.failure(fmt.Sprintf("shop-%04d.example", i))
	}
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
