package idem_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// bareLimiters answer 429 with no Retry-After and no rate-limit fields:
// nothing says how long to wait, and the docs ask the client to back off.
var bareLimiters = []struct {
	name string
	set  func(h http.Header) (body string)
}{
	// Stripe: "If you send many requests in quick succession, you might
	// receive 429 error responses" ... handle them with "an exponential
	// backoff" (docs.stripe.com/rate-limits); its 429 body is an error of
	// code rate_limit, with no Retry-After (modelled).
	{"stripe rate_limit", func(h http.Header) string {
		h.Set("Request-Id", "req_throttled")
		return `{"error":{"code":"rate_limit","message":"Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.","type":"invalid_request_error"}}`
	}},
	// Amazon API Gateway's throttling: "Exceeding the throttling limit or
	// quota returns a \"429 Too Many Requests\" or \"Limit Exceeded\"
	// error response" (repost.aws/knowledge-center/api-gateway-429-limit);
	// its body {"message":"Too Many Requests"}, no wait header (modelled).
	{"api gateway", func(h http.Header) string {
		h.Set("X-Amzn-Errortype", "TooManyRequestsException")
		return `{"message":"Too Many Requests"}`
	}},
}

// throttlingBare answers every submit 429 before until, as set says,
// with no wait in it.
func throttlingBare(set func(h http.Header) string, until time.Time) func(time.Time, http.ResponseWriter) bool {
	return func(now time.Time, w http.ResponseWriter) bool {
		if !now.Before(until) {
			return false
		}
		body := set(w.Header())
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, body)
		return true
	}
}

// A host back from an outage whose limiter answers every request of a
// backlog "429" for an hour, saying nothing of how long to wait, is
// asking to be sent less: Run must back off from the host (rests from
// the reconcile interval, doubling, jittered, within WithReconcile's
// maximum), not send every due operation into the limiter on every
// pass (before: 2200 requests in the hour for 200 orders). Resting only
// delays: once the host answers, every order settles, ordered once.
// Default settings but the clock.
func TestRunBacksOffAHostThatThrottlesWithoutAWait(t *testing.T) {
	const backlog = 200
	// Rests of at least half of 30 s, 60 s, 120 s, … (jitter ±50%), at
	// most an hour: the first seven end by 1905 s, the eighth past the
	// throttled 59 minutes. Each burst, the first pass's and one as each
	// rest ends, is at most a host's share of visits
	// (WithResumeConcurrency) under way when the first 429 rests it.
	const most = 8 * idem.DefaultResumeConcurrency
	for _, bl := range bareLimiters {
		t.Run(bl.name, func(t *testing.T) {
			store, throttled, orders := throttledHour(t, backlog, func(until time.Time) func(time.Time, http.ResponseWriter) bool {
				return throttlingBare(bl.set, until)
			}, most)
			t.Logf("%d requests refused in the hour", throttled)
			requireEachOrderedOnce(t, store, backlog, orders)
		})
	}
}
