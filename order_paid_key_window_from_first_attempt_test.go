package idem_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// meshRetryThrottled passes the first payment to the server, which
// executes it, loses its answer (a reset the mesh retries) and answers
// the retry with the server's own 429, Retry-After an hour, before the
// request reaches its order check: the caller sees a 429 for a request
// a copy of which paid. Result queries get a gateway's 502 while down.
type meshRetryThrottled struct {
	resultHostDown
	posts atomic.Int32
}

func (g *meshRetryThrottled) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := g.resultHostDown.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || g.posts.Add(1) != 1 {
		return res, err
	}
	return answerInstead(res, http.StatusTooManyRequests, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3600"}},
		`{"error":{"code":"rate_limited","message":"Too many requests"}}`), nil
}

// TestOrderPaidKeyWindowCountsFromTheFirstAttempt: k's first attempt
// pays the order on a server that keeps the key 24 hours (Stripe: "keys
// are eligible to be removed from the system automatically after
// they're at least 24 hours old", https://docs.stripe.com/idempotency;
// idem.KeyRetentionStripe), its answer lost to a reset a mesh retries
// (Envoy's retry_on "reset"), and the retry is answered 429, Retry-After
// an hour (RFC 9110 §10.2.3; that the server throttles the retry before
// its order check is modelled). The second attempt, an hour on, is
// refused "Order already paid" (the order checked before the key), and
// the result endpoint's host is down (a gateway's 502) until 24 h 30
// min after the first attempt: the server has pruned k, and the payment
// stored under it, half an hour before. The window was counted from the
// second attempt, the first that may have executed by its own answer,
// and the endpoint's "not found" failed k (ErrFailed), the caller then
// paying again under a new key: a second charge. The copy that paid is
// the first attempt's: past its window k stays unknown, ReviewKeyExpired;
// k sent twice (the mesh's copy, the second attempt), one charge.
func TestOrderPaidKeyWindowCountsFromTheFirstAttempt(t *testing.T) {
	s := newPaidOrderServer(t, http.StatusConflict)
	s.orderFirst = true
	gw := &meshRetryThrottled{resultHostDown: resultHostDown{base: s.srv.Client().Transport}}
	gw.down.Store(true)
	clock := idemtest.NewClock(epoch)
	c := s.openThrough(t, gw, clock, idem.WithKeyRetention(idem.KeyRetentionStripe))

	res, err := c.Submit(t.Context(), s.pay("k", true))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.Equal(t, idem.StatePending, res.State, "a 429: not executed, by its answer")
	s.requireSent(t, 1, map[string]int{"k": 1})

	op := resumeK(t, c, clock, time.Hour)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)
	s.requireSent(t, 1, map[string]int{"k": 2})
	s.requireQueries(t, 0) // the gateway's 502s

	s.mu.Lock()
	delete(s.stored, "k") // 24 h after the mesh's copy: pruned
	s.mu.Unlock()
	gw.down.Store(false)
	op = resumeK(t, c, clock, 23*time.Hour+30*time.Minute)
	require.Equal(t, idem.StateUnknown, op.State, "the endpoint's not found past the first attempt's key window")
	require.Equal(t, idem.ReviewKeyExpired, op.Review)
	s.requireSent(t, 1, map[string]int{"k": 2})
	s.requireQueries(t, 1)
}
