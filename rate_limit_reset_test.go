package idem_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// rateLimiters are servers that answer 429 with no Retry-After, saying
// when their quota resets in rate-limit fields instead. Each sets the
// fields for a 429 at now of a quota that resets at until.
var rateLimiters = []struct {
	name string
	set  func(h http.Header, now, until time.Time)
}{
	// GitHub's REST API: "If the x-ratelimit-remaining header is 0, you
	// should not make another request until after the time specified by
	// the x-ratelimit-reset header ... in UTC epoch seconds"
	// (docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api).
	{"github epoch", func(h http.Header, _, until time.Time) {
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(until.Unix(), 10))
	}},
	// Envoy's local rate limit with enable_x_ratelimit_headers
	// (DRAFT_VERSION_03): x-ratelimit-reset in seconds until the reset,
	// and no Retry-After on its 429.
	{"envoy seconds", func(h http.Header, now, until time.Time) {
		h.Set("X-RateLimit-Limit", "100")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", secondsTo(now, until))
	}},
	// draft-ietf-httpapi-ratelimit-headers-06: RateLimit-Reset in
	// delta-seconds.
	{"ietf draft-06", func(h http.Header, now, until time.Time) {
		h.Set("RateLimit-Limit", "100")
		h.Set("RateLimit-Remaining", "0")
		h.Set("RateLimit-Reset", secondsTo(now, until))
	}},
	// The draft's later RateLimit field: a policy's remaining quota (r)
	// and the seconds until it resets (t).
	{"ietf RateLimit t", func(h http.Header, now, until time.Time) {
		h.Set("RateLimit-Policy", `"hour";q=100;w=3600`)
		h.Set("RateLimit", `"hour";r=0;t=`+secondsTo(now, until))
	}},
}

// secondsTo is the whole seconds from now to until, rounded up.
func secondsTo(now, until time.Time) string {
	return fmt.Sprint(int64(math.Ceil(until.Sub(now).Seconds())))
}

// quotaSpent answers every submit 429 before until, its quota's reset
// told by set, with the server's Date on the shared clock.
func quotaSpent(set func(h http.Header, now, until time.Time), until time.Time) func(time.Time, http.ResponseWriter) bool {
	return func(now time.Time, w http.ResponseWriter) bool {
		if !now.Before(until) {
			return false
		}
		w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
		set(w.Header(), now, until)
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"message":"API rate limit exceeded"}`)
		return true
	}
}

// A host back from an outage whose rate limiter answers "429, your quota
// resets in an hour" in rate-limit fields rather than Retry-After has
// said how long to wait just as plainly: Run must not send every due
// operation of a backlog into it on every pass (before: thousands of
// requests in the hour, each refused), only as many as with a
// Retry-After. Then every operation settles, each ordered once.
// Default settings but the clock.
func TestRunHonoursRateLimitResetAcrossOperations(t *testing.T) {
	const backlog = 200
	for _, rl := range rateLimiters {
		t.Run(rl.name, func(t *testing.T) {
			store, _, orders := throttledHour(t, backlog, func(until time.Time) func(time.Time, http.ResponseWriter) bool {
				return quotaSpent(rl.set, until)
			}, 2*idem.DefaultResumeConcurrency)
			requireEachOrderedOnce(t, store, backlog, orders)
		})
	}
}

// A call told "429, your quota resets in 40 s" in rate-limit fields
// waits the 40 s before its resend, as it would a Retry-After (before:
// its backoff's half second, a resend into the same spent quota), on
// the server's clock as a Retry-After's date is read, even days from
// ours. A reset whose quota has some left is another limit's, and one
// past asks for no wait: both leave the backoff's. Default settings but
// the clock.
func TestCallWaitsForTheRateLimitReset(t *testing.T) {
	type shape struct {
		name string
		skew time.Duration // the server's clock minus ours
		set  func(h http.Header, now, until time.Time)
		want time.Duration // 0: the backoff's first wait, under a second
	}
	var shapes []shape
	for _, rl := range rateLimiters {
		shapes = append(shapes, shape{rl.name, 0, rl.set, 40 * time.Second})
	}
	shapes = append(shapes,
		shape{"github epoch, our clock three days behind", 72 * time.Hour, rateLimiters[0].set, 40 * time.Second},
		shape{"github epoch, our clock three days ahead", -72 * time.Hour, rateLimiters[0].set, 40 * time.Second},
		// Modelled: an epoch in milliseconds, as JavaScript's Date.now()
		// gives it, not seconds: 13 digits no time in seconds has before
		// the year 33658.
		shape{"epoch in milliseconds", 0, func(h http.Header, now, until time.Time) {
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(until.UnixMilli(), 10))
		}, 40 * time.Second},
		shape{"github secondary limit, quota left", 0, func(h http.Header, now, until time.Time) {
			h.Set("X-RateLimit-Remaining", "4000")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(50*time.Minute).Unix(), 10))
		}, 0},
		shape{"ietf RateLimit, quota left", 0, func(h http.Header, now, until time.Time) {
			h.Set("RateLimit", `"hour";r=40;t=3000`)
		}, 0},
		// The draft's -07 form, one dictionary for the field, as
		// express-rate-limit's standardHeaders "draft-7" sends it.
		shape{"ietf draft-07 RateLimit, quota left", 0, func(h http.Header, now, until time.Time) {
			h.Set("RateLimit", "limit=100, remaining=40, reset=3000")
		}, 0},
		shape{"epoch past", 0, func(h http.Header, now, until time.Time) {
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(-time.Minute).Unix(), 10))
		}, 0},
	)
	for _, tt := range shapes {
		t.Run(tt.name, func(t *testing.T) {
			clock := idemtest.NewClock(epoch)
			v := retryAfterVendor(t, clock, tt.skew, func(s time.Time) http.Header {
				h := http.Header{"Date": {s.Format(http.TimeFormat)}}
				tt.set(h, s, s.Add(40*time.Second))
				return h
			})
			c := clientFor(t, v.srv, clock)
			res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: v.srv.URL + "/v1/payments", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			sleeps := clock.Sleeps()
			require.Len(t, sleeps, 1, "waits")
			if tt.want == 0 {
				require.Less(t, sleeps[0], time.Second, "wait")
			} else {
				require.Equal(t, tt.want, sleeps[0], "wait")
			}
			v.requireKeys(t, "Idempotency-Key", "k", 2)
		})
	}
}
