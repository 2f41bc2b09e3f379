package idem

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A rate limit's reset is read as seconds, epoch seconds or an HTTP-date;
// what is malformed, signed or huge never panics nor wraps to a short
// wait.
func TestRateLimitResetForms(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	epoch := func(d time.Duration, frac string) string { return strconv.FormatInt(now.Add(d).Unix(), 10) + frac }
	for _, tt := range []struct {
		name   string
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{"seconds", http.Header{"X-Ratelimit-Reset": {"30"}}, 30 * time.Second, true},
		{"fractional seconds", http.Header{"Ratelimit-Reset": {"1.5"}}, 1500 * time.Millisecond, true},
		{"epoch", http.Header{"X-Ratelimit-Reset": {epoch(time.Hour, "")}}, time.Hour, true},
		{"fractional epoch rounds up", http.Header{"X-Ratelimit-Reset": {epoch(time.Hour, ".25")}}, time.Hour + time.Second, true},
		{"epoch in milliseconds", http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Hour+time.Millisecond).UnixMilli(), 10)}}, time.Hour + time.Millisecond, true},
		{"epoch past", http.Header{"X-Ratelimit-Reset": {epoch(-time.Hour, "")}}, 0, true},
		{"epoch beyond time.Unix", http.Header{"X-Ratelimit-Reset": {"9223372036854775807"}}, year, true},
		{"digits beyond int64", http.Header{"X-Ratelimit-Reset": {strings.Repeat("9", 30)}}, year, true},
		{"http-date", http.Header{"Ratelimit-Reset": {now.Add(time.Minute).Format(http.TimeFormat)}}, time.Minute, true},
		{"longest of two families", http.Header{"Ratelimit-Reset": {"10"}, "X-Ratelimit-Reset": {"20"}}, 20 * time.Second, true},
		{"quota left", http.Header{"X-Ratelimit-Remaining": {"3"}, "X-Ratelimit-Reset": {"20"}}, 0, false},
		{"RateLimit items", http.Header{"Ratelimit": {`"burst";r=3;t=5, "day";r=0;t=90`}}, 90 * time.Second, true},
		{"RateLimit dictionary", http.Header{"Ratelimit": {`limit=100, remaining=0, reset=50`}}, 50 * time.Second, true},
		{"RateLimit dictionary, quota left", http.Header{"Ratelimit": {`limit=100, remaining=40, reset=50`}}, 0, false},
		{"RateLimit dictionary, quota left after the reset", http.Header{"Ratelimit": {`reset=50, remaining=40`}}, 0, false},
		{"negative", http.Header{"X-Ratelimit-Reset": {"-5"}}, 0, false},
		{"signed epoch", http.Header{"X-Ratelimit-Reset": {"+" + epoch(time.Hour, "")}}, 0, false},
		{"garbage", http.Header{"X-Ratelimit-Reset": {"soon"}, "Ratelimit": {"t=;r=x,;;==,"}}, 0, false},
		{"none", http.Header{"X-Ratelimit-Limit": {"100"}}, 0, false},
	} {
		got, ok := rateLimitReset(tt.h, now)
		require.Equalf(t, tt.wantOK, ok, "%s: ok", tt.name)
		require.Equalf(t, tt.want, got, "%s: wait", tt.name)
	}
}
