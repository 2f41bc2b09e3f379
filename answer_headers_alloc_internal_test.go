package idem

import (
	"net/http"
	"testing"
	"time"
)

// Every answer, on a good day one with no cache or Retry-After header at
// all, goes through fromCache and ParseRetryAfterHeader: reading nothing
// there must cost nothing.
func TestPlainAnswerHeadersAllocateNothing(t *testing.T) {
	now := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	h := http.Header{"Content-Type": {"application/json"}, "Date": {now.Format(http.TimeFormat)},
		"Idempotency-Key": {"k"}, "Request-Id": {"req_1"}}
	if n := testing.AllocsPerRun(100, func() { _ = fromCache(h) }); n != 0 {
		t.Errorf("fromCache(plain header) allocs = %v; want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseRetryAfterHeader(h, now) }); n != 0 {
		t.Errorf("ParseRetryAfterHeader(plain header) allocs = %v; want 0", n)
	}
}
