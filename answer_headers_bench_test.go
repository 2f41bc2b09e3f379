package idem

import (
	"net/http"
	"testing"
	"time"
)

// What every answer now pays for fromCache and ParseRetryAfterHeader: a
// typical API answer's header (no cache, no Retry-After), and one
// through a CDN that passed it on (X-Cache: Miss).
func BenchmarkAnswerHeaders(b *testing.B) {
	now := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	for _, bc := range []struct {
		name string
		h    http.Header
	}{
		{"plain", http.Header{"Content-Type": {"application/json"}, "Date": {now.Format(http.TimeFormat)},
			"Idempotency-Key": {"k"}, "Request-Id": {"req_1"}, "Content-Length": {"120"}}},
		{"cdn miss", http.Header{"Content-Type": {"application/json"}, "Date": {now.Format(http.TimeFormat)},
			"X-Cache": {"Miss from cloudfront"}, "Age": {"0"}, "Cf-Cache-Status": {"DYNAMIC"}}},
		{"429 with date", http.Header{"Date": {now.Format(http.TimeFormat)}, "Retry-After": {now.Add(5 * time.Second).Format(http.TimeFormat)}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = fromCache(bc.h)
				_, _ = ParseRetryAfterHeader(bc.h, now)
			}
		})
	}
}
