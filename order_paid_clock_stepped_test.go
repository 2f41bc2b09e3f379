package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestOrderPaidNotFoundAfterAClockSteppedBackIsNotFailed: k's first
// attempt, journaled by a clock running 2 h fast, is refused "Order
// already paid" by a server that keeps the key 24 hours (Stripe: "keys
// are eligible to be removed from the system automatically after
// they're at least 24 hours old", https://docs.stripe.com/idempotency;
// idem.KeyRetentionStripe) and checks the order first: a copy of k a
// mesh sent first paid it, its answer lost (paidOrderServer,
// orderFirst). NTP steps the clock back; the result endpoint's host is
// down (a gateway's 502) until 25 h after the send, an hour after the
// server pruned k with the payment under it. Resume, visiting k while
// its journaled times were still in the clock's future, handed it off,
// and the clock having caught up, the "not found" was judged inside a
// window counted from the fast clock's FirstSent (23 h old by it) and
// failed k (ErrFailed), the caller paying again: a second charge. A
// window found untrusted is flagged ReviewClockStepped, as resends flag
// it, and stays untrusted: unknown, k sent once, one charge, one query.
func TestOrderPaidNotFoundAfterAClockSteppedBackIsNotFailed(t *testing.T) {
	s := newPaidOrderServer(t, http.StatusConflict)
	s.orderFirst = true
	s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
	gw := &resultHostDown{base: s.srv.Client().Transport}
	gw.down.Store(true)
	clock := idemtest.NewClock(epoch)
	clk := &skewedClock{Clock: clock}
	clk.offset.Store(int64(2 * time.Hour))
	c := s.openThrough(t, gw, clk, idem.WithKeyRetention(idem.KeyRetentionStripe))

	res, err := c.Submit(t.Context(), s.pay("k", true))
	requireOrderPaidUnknown(t, res, err)

	clk.offset.Store(0) // NTP corrects the clock
	op := resumeK(t, c, clock, time.Minute)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewClockStepped, op.Review, "visited while its times were in the clock's future")

	s.mu.Lock()
	delete(s.stored, "k") // 24 h after the send: pruned
	s.mu.Unlock()
	gw.down.Store(false)
	op = resumeK(t, c, clock, 25*time.Hour-time.Minute)
	require.Equal(t, idem.StateUnknown, op.State, "the endpoint's not found, the key's age not measurable")
	require.Equal(t, idem.ReviewClockStepped, op.Review)
	s.requireSent(t, 1, map[string]int{"k": 1})
	s.requireQueries(t, 1)
}
