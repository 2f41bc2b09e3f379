package idem_test

import (
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// downTransport refuses every connection until the shared clock reads
// up, as a server that is down does; then it passes requests to base.
type downTransport struct {
	base  http.RoundTripper
	clock *idemtest.Clock
	up    time.Time
}

func (d *downTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !d.clock.Now().Before(d.up) {
		return d.base.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	// Play net/http's part: it takes the request before it dials, which
	// is how idem knows a failed dial sent nothing.
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.GetConn != nil {
		tr.GetConn(req.URL.Host)
	}
	return nil, dialRefused
}

// An order the server never received (it was down) must not be handed to
// a person, never to be sent again, because the clock ran four days fast
// for twenty minutes while Run ran: by the time Run measured, it is hours
// old, not past the 72 h reconciliation deadline. Once the server is back,
// Run sends it, once.
func TestRunDeadlineOutlivesClockSteppedAhead(t *testing.T) {
	clk := &steppedClock{}
	down := &downTransport{}
	e := newEnv(t, clientOpts(idem.WithClock(clk), idem.WithHTTPClient(&http.Client{Transport: down})))
	start := e.clock.Now()
	clk.Clock, down.base, down.clock, down.up = e.clock, e.srv.Client().Transport, e.clock, start.Add(150*time.Minute)
	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":100}`))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StatePending, res.State, "the server refused every connection: never sent")

	// Run's hour-long start-up is over when the clock runs fast; the
	// server comes back half an hour after the clock is right again.
	clk.from, clk.to, clk.ahead = start.Add(2*time.Hour), start.Add(2*time.Hour+20*time.Minute), 4*24*time.Hour
	runUntil(t, e, start.Add(5*time.Hour))
	requireOrderedOnce(t, e, "k")
}

// requireOrderedOnce checks that key's order, never sent before Run's
// visit, settled unflagged, sent once: one submit, one order.
func requireOrderedOnce(t *testing.T, e *env, key string) {
	t.Helper()
	rec := e.record(key)
	require.Equal(t, idem.StateSucceeded, rec.State, "review %q", rec.Review)
	require.Empty(t, rec.Review)
	require.Len(t, e.submits(key), 1, "submits that reached the server")
	require.Equal(t, 1, e.srv.Effects(scope, key), "orders")
}
