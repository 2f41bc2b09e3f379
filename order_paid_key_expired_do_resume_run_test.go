package idem_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// TestOrderHeldNotFoundPastTheKeyWindowByDoResumeAndRun is
// TestOrderPaidNotFoundPastTheKeyWindowIsNotFailed for each way an
// operation is asked about again, at default settings (the key window
// DefaultKeyRetention's), for a payment refused "Order already paid" and
// for a create refused "Order already exists" (orderExistsWords): a
// copy of k a mesh sent first paid (or made) the order under k, the
// result endpoint's host is down (a gateway's 502) for two days, and
// the server has forgotten k with what it stored under it. The first to
// ask once the host is back, the caller's Do, Resume or Run, leaves k
// unknown, ReviewKeyExpired, and so does a Do after it: k sent once, one
// charge, one query by the first and one by the Do.
func TestOrderHeldNotFoundPastTheKeyWindowByDoResumeAndRun(t *testing.T) {
	asks := []struct {
		name string
		ask  func(t *testing.T, c *idem.Client, clock *idemtest.Clock)
	}{
		{"Do", func(t *testing.T, c *idem.Client, _ *idemtest.Clock) {
			op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
			require.NoError(t, err)
			res, err := c.Do(t.Context(), op)
			requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrKeyExpired}, "", idem.ReviewKeyExpired)
		}},
		{"Resume", func(t *testing.T, c *idem.Client, _ *idemtest.Clock) {
			_, err := c.Resume(t.Context())
			require.NoError(t, err)
		}},
		{"Run", func(t *testing.T, c *idem.Client, clock *idemtest.Clock) {
			// Held at its first sleep: one pass.
			held, release := clock.HoldFrom(clock.Now())
			defer release()
			ctx, cancel := context.WithCancel(t.Context())
			ran := runAsync(ctx, c)
			within(t, held, "Run's first sleep")
			cancel()
			release()
			require.ErrorIs(t, within(t, ran, "Run after cancel"), context.Canceled)
		}},
	}
	orders := []struct {
		name, words string
		req         func(s *paidOrderServer) idem.Request
	}{
		{"paid", "", func(s *paidOrderServer) idem.Request { return s.pay("k", true) }},
		{"exists", orderExistsWords[0].body, func(s *paidOrderServer) idem.Request { return s.createOrder("k", true) }},
	}
	for _, o := range orders {
		for _, a := range asks {
			t.Run(o.name+" "+a.name, func(t *testing.T) {
				s := newPaidOrderServer(t, http.StatusConflict)
				s.orderFirst, s.words = true, o.words
				s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
				gw := &resultHostDown{base: s.srv.Client().Transport}
				gw.down.Store(true)
				clock := idemtest.NewClock(epoch)
				c := s.openThrough(t, gw, clock)

				res, err := c.Submit(t.Context(), o.req(s))
				require.ErrorIs(t, err, idem.ErrNeedsReview)
				require.Equal(t, idem.StateUnknown, res.State)
				require.Equal(t, idem.ReviewRefusedAfterSend, res.Review)

				s.mu.Lock()
				delete(s.stored, "k") // two days on: the server has forgotten k
				s.mu.Unlock()
				gw.down.Store(false)
				clock.Advance(48 * time.Hour)
				a.ask(t, c, clock)
				op, err := c.Lookup(t.Context(), idem.DefaultScope, "k")
				require.NoError(t, err)
				require.Equal(t, idem.StateUnknown, op.State)
				require.Equal(t, idem.ReviewKeyExpired, op.Review)
				s.requireSent(t, 1, map[string]int{"k": 1})
				s.requireQueries(t, 1)
				s.requireDoKeyExpired(t, c, clock, op)
			})
		}
	}
}
