package idem

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// The default backoff between attempts: exponential with jitter.
const (
	DefaultInitialInterval = 500 * time.Millisecond
	DefaultMultiplier      = 2.0
	DefaultJitter          = 0.5 // each wait is drawn from ±50% of the interval
	DefaultMaxInterval     = 30 * time.Second
)

// DefaultRetryAfterCap bounds how long a server's Retry-After can make idem
// wait, so a hostile or broken header cannot park a caller for hours.
const DefaultRetryAfterCap = 60 * time.Second

// newDefaultBackoff is the policy used unless WithBackoff replaces it. Its
// elapsed-time limit is off: the client's own budget decides when to stop.
func newDefaultBackoff() backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(DefaultInitialInterval),
		backoff.WithMultiplier(DefaultMultiplier),
		backoff.WithRandomizationFactor(DefaultJitter),
		backoff.WithMaxInterval(DefaultMaxInterval),
		backoff.WithMaxElapsedTime(0),
	)
}

// maxRetryAfterLen rejects absurd header values before parsing them.
const maxRetryAfterLen = 64

// ParseRetryAfter reads a Retry-After header value, either delta-seconds
// ("120") or an HTTP-date, relative to now. It reports false for an empty
// or malformed value, which callers ignore. A date in the past means no
// wait; a huge number of seconds or a far-off date saturates at a year
// rather than overflowing, and the client caps it (WithRetryAfterCap).
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxRetryAfterLen {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return maxWait, true
			}
			return 0, false
		}
		if secs > uint64(maxWait/time.Second) {
			return maxWait, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, maxWait), true
}

// maxWait is where Retry-After saturates: far beyond any sane cap.
const maxWait = 365 * 24 * time.Hour
