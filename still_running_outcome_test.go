package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// submitAndQueryStatuses returns the status of every request srv logged
// for key, submits as "POST 409" and queries as "GET 200", in order.
func submitAndQueryStatuses(srv *idemtest.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		out = append(out, r.Method+" "+http.StatusText(r.Status))
	}
	return out
}

// stillRunningCases are runs, by the server's clock and in real time,
// that outlast idem's attempt timeout (10 s, real time): one outlasting
// the call's budget too (a few seconds of waits on the clock, at most a
// minute), one ending within it (the clock moved on while the first
// attempt was held: a test's Advance standing in for the wall clock).
var stillRunningCases = []stillRunningCase{
	{"run outlasts the call's budget", time.Minute, 0, false},
	{"run ends within the call's budget", 30 * time.Second, 28 * time.Second, true},
}

type stillRunningCase struct {
	name          string
	delay         time.Duration // the run
	advance       time.Duration // on the clock, once the first attempt arrives
	settledInCall bool
}

// submitWhileRunning submits k at default settings to a server on which
// its request runs as tc says, under the fault kind, and checks how it
// ends: settled in the call as final, or left processing
// (ErrUnknownOutcome) and settled so by the Resume once it has run,
// counted in sum. It returns the server, the client and the operation,
// final.
func submitWhileRunning(t *testing.T, tc stillRunningCase, kind idemtest.FaultKind, final idem.State, sum idem.Summary) (*idemtest.Server, *idem.Client, *idem.Operation) {
	t.Helper()
	clock := idemtest.NewClock(epoch)
	srv := faultedServer(t, clock, idemtest.Fault{Kind: kind, Key: "k", Delay: tc.delay})
	c := defaultClientOf(t, srv, clock)
	advanceOnArrival(t, srv, clock, tc.advance)
	res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
	t.Logf("Submit: %v %v; server: %v; clock +%v", res.State, err, submitAndQueryStatuses(srv), clock.Now().Sub(epoch))
	if tc.settledInCall {
		require.Equal(t, final, res.State, "%v", err)
	} else {
		require.Equal(t, idem.StateProcessing, res.State)
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NotErrorIs(t, err, idem.ErrFailed)
		clock.Advance(tc.delay)
		requireResume(t, c, sum)
	}
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
	require.NoError(t, err)
	require.Equal(t, final, op.State)
	require.Empty(t, op.Review)
	return srv, c, op
}

// advanceOnArrival advances clock by d once srv has received a submit,
// from another goroutine, while the caller's first attempt is held; the
// test waits for it before it ends.
func advanceOnArrival(t *testing.T, srv *idemtest.Server, clock *idemtest.Clock, d time.Duration) {
	t.Helper()
	if d == 0 {
		return
	}
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		deadline := time.Now().Add(10 * time.Second)
		for srv.Stats().Submits == 0 {
			if time.Now().After(deadline) {
				t.Errorf("no submit arrived in 10s")
				return
			}
			time.Sleep(time.Millisecond)
		}
		clock.Advance(d)
	}()
}

// A request still running past idem's attempt timeout that then fails
// (Stripe saves a decline once the endpoint has started executing, "results
// are only saved if an API endpoint started executing",
// https://docs.stripe.com/api/idempotent_requests): the resend gets 409
// idempotency_key_in_use, the result endpoint 404 while it runs, then
// failed. At default settings idem never reports it succeeded and places
// no order: the run outlasting the call's budget leaves it processing
// (ErrUnknownOutcome), which Resume settles failed once it has run; a run
// ending within the budget is settled failed by the call. Do of it sends
// nothing; a new operation under a new key pays once.
func TestRequestStillRunningThenDeclinedIsFailedNeverSucceeded(t *testing.T) {
	for _, tc := range stillRunningCases {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, op := submitWhileRunning(t, tc, idemtest.StillRunningDecline, idem.StateFailed, idem.Summary{Visited: 1, Failed: 1})
			require.Contains(t, string(op.Result.Body), "card declined")
			statuses := submitStatuses(srv)
			require.Equal(t, []int{0, http.StatusConflict}, statuses[:2], "the first attempt given up on, the resend met it running")
			for _, st := range statuses[2:] {
				require.Equal(t, http.StatusPaymentRequired, st, "a resend after the 409: the decline replayed")
			}
			require.Zero(t, srv.Effects("", "k"), "declined: no order")

			sent := len(submitStatuses(srv))
			_, err := c.Do(t.Context(), op)
			require.ErrorIs(t, err, idem.ErrFailed, "the decline is final")
			require.Len(t, submitStatuses(srv), sent, "Do of the declined operation sends nothing")
			res, err := c.Submit(t.Context(), idem.Request{Key: "k2", URL: srv.URL + "/orders", Body: []byte(`{"amount":100}`)})
			require.NoError(t, err)
			require.Equal(t, idem.StateSucceeded, res.State)
			require.Equal(t, 1, srv.Effects("", "k2"))
			require.Equal(t, 1, srv.Stats().SideEffects, "paid once, under the new key")
		})
	}
}

// A request still running past idem's attempt timeout whose result
// endpoint answers "processing" while it runs (modelled: an
// operation-status endpoint), instead of 404: ours in flight, asked about
// again, never resent into a second order, settled succeeded once it has
// committed: within the call's budget, or by Resume after it.
func TestRequestStillRunningShownProcessingIsSettledOnceCommitted(t *testing.T) {
	for _, tc := range stillRunningCases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, op := submitWhileRunning(t, tc, idemtest.StillRunningProcessing, idem.StateSucceeded, idem.Summary{Visited: 1, Succeeded: 1})
			require.Equal(t, "ord_000001", op.Result.ResourceID)
			require.Equal(t, []int{0}, submitStatuses(srv), "sent once, given up on; asked about after, never resent")
			requireOneOrder(t, srv, "k")
		})
	}
}
