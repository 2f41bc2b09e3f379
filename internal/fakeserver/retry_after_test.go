package fakeserver_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestHugeRetryAfterStaysValid: a fault with the largest duration
// (POST /_faults {"kind":"throttle","retry_after":"2562047h47m16.854775807s"},
// or any value within a second of it) overflowed the rounding up to whole
// seconds and sent "Retry-After: -9223372036", a negative delay; as an
// HTTP-date it sent a twelve-digit year, which no HTTP-date parser reads.
// A faithful server sends a valid header: a huge wait, saturated.
func TestHugeRetryAfterStaysValid(t *testing.T) {
	for _, httpDate := range []bool{false, true} {
		h := newHarness(t, fakeserver.Config{})
		require.NoError(t, h.srv.Inject(fakeserver.Fault{
			Kind: fakeserver.Throttle, RetryAfter: time.Duration(math.MaxInt64), HTTPDate: httpDate,
		}))
		r := h.submit(t, "k1", `{"amount":1}`)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		ra := r.header.Get("Retry-After")
		if httpDate {
			when, err := http.ParseTime(ra)
			require.NoError(t, err, "Retry-After %q is not an HTTP-date", ra)
			require.True(t, when.After(h.clock.Now().Add(100*365*24*time.Hour)), "Retry-After %q", ra)
			continue
		}
		secs, err := strconv.ParseInt(ra, 10, 64)
		require.NoError(t, err, "Retry-After %q", ra)
		require.Positive(t, secs, "Retry-After %q", ra)
	}
}
