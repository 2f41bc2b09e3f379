package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// rateLimited answers every request before until with its own 429 and a
// Retry-After to until (or its maintenance page: page), the request never
// passed on; it counts them, per method.
type rateLimited struct {
	base  http.RoundTripper
	clock *idemtest.Clock
	until time.Time
	mu    sync.Mutex
	count map[string]int
	total atomic.Int64
	// short: each answer's Retry-After is a second, as a per-second
	// limiter's, not the time to until.
	short bool
	// page: the answer is a maintenance page, 200, as a front end's put
	// up over the API for the while.
	page bool
}

func (l *rateLimited) RoundTrip(r *http.Request) (*http.Response, error) {
	now := l.clock.Now()
	if !now.Before(l.until) {
		return l.base.RoundTrip(r)
	}
	l.total.Add(1)
	l.mu.Lock()
	l.count[r.Method]++
	l.mu.Unlock()
	if r.Body != nil {
		_ = r.Body.Close()
	}
	if l.page {
		return frontPage(r, http.StatusOK, http.Header{}, `<html><head><title>Down for maintenance</title></head><body>We'll be back soon.</body></html>`), nil
	}
	body := `{"error":"rate limited"}`
	wait := int(l.until.Sub(now)/time.Second) + 1
	if l.short {
		wait = 1
	}
	h := http.Header{"Content-Type": {"application/json"}, "Retry-After": {fmt.Sprint(wait)}}
	return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Request: r, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
}

// A restart after an outage finds a backlog of orders whose answers were
// lost, and the API, flooded by every client catching up, answers every
// request, result queries too, with a 429 for an hour: Stripe's "If you
// send many requests in quick succession, you might see error responses
// with status code 429 ... Treat the limits as maximums, and don't
// generate unnecessary load" (docs.stripe.com/rate-limits), the wait in
// a Retry-After (RFC 9110 10.2.3), to the hour's end or a second at a
// time. Resume must not send the whole backlog into the limiter, nor wait
// the hour at start-up: it leaves the backlog to Run, which settles every
// order, each once, though most are past their key window by then.
// Default settings but the clock.
func TestBacklogThroughAnHourOfNoAnswers(t *testing.T) {
	t.Run("come back in an hour", func(t *testing.T) { backlogThroughNoAnswers(t, &rateLimited{}) })
	t.Run("come back in a second, for an hour", func(t *testing.T) { backlogThroughNoAnswers(t, &rateLimited{short: true}) })
	// A maintenance page over the API for the hour (modelled: a front
	// end's page put up for a planned window, served 200 to every path)
	// answers every query with HTML that says nothing of the order. Those
	// past their key window were flagged for a person, which is right,
	// but were queried again only a day later, as after an answer of the
	// endpoint's own: three hours after the API was back every one was
	// still open, while the endpoint would have settled each at once.
	t.Run("maintenance page for an hour", func(t *testing.T) { backlogThroughNoAnswers(t, &rateLimited{page: true}) })
}

// backlogThroughNoAnswers journals a backlog of orders executed with
// their answers lost, then lets Resume and Run drive them while limiter
// stands in front of the server for an hour, and three hours on.
func backlogThroughNoAnswers(t *testing.T, limiter *rateLimited) {
	const backlog = 300
	start := epoch
	o := newOutageJournal(t, start)
	keys := numberedKeys("k%04d", backlog)
	o.submitAt(t, start.Add(-time.Minute), nil, o.srv.ResultURL, keys...)

	limiter.base, limiter.clock, limiter.until, limiter.count = http.DefaultTransport, o.clock, start.Add(time.Hour), map[string]int{}
	c, err := idem.New(o.store, idem.WithHTTPClient(&http.Client{Transport: limiter}), idem.WithClock(o.clock))
	require.NoError(t, err)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	t.Logf("summary %+v, clock +%v, requests %v", sum, o.clock.Now().Sub(start), limiter.count)
	require.Equal(t, backlog, sum.Visited)
	require.Zero(t, sum.Failed, "failed (%+v)", sum)
	if !limiter.short && !limiter.page {
		require.LessOrEqual(t, int(limiter.total.Load()), 4*idem.DefaultResumeConcurrency, "requests into the limiter")
	}
	require.NoError(t, c.Close())

	_, stop := o.run(t, limiter)
	o.runTo(t, start, limiter.until.Add(-time.Minute), func() {
		limiter.mu.Lock()
		t.Logf("by the hour's end: requests %v", limiter.count)
		limiter.mu.Unlock()
		if !limiter.short && !limiter.page {
			require.LessOrEqual(t, int(limiter.total.Load()), 8*idem.DefaultResumeConcurrency, "requests into the limiter in its hour")
		}
	})
	o.runTo(t, start, limiter.until.Add(3*time.Hour), func() {})
	stop()
	for _, key := range keys {
		rec, err := o.store.Get(t.Context(), idem.DefaultScope, key)
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, rec.State, "%s three hours after the storm (review %q, next due in %v)", key, rec.Review, rec.NextDue.Sub(o.clock.Now()))
		require.Empty(t, rec.Review, key)
		require.Equal(t, 1, o.srv.Effects("", key), "orders of %s", key)
	}
}
