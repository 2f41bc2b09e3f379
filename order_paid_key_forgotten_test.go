package idem_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// resultHostDown answers every result query with a gateway's 502 while
// down, the request never passed on: the result endpoint's host is
// unreachable. Submits pass.
type resultHostDown struct {
	base http.RoundTripper
	down atomic.Bool
}

func (g *resultHostDown) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !g.down.Load() {
		return g.base.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/html"}}, Body: io.NopCloser(strings.NewReader("<html><body>502 Bad Gateway</body></html>")),
		Request: req,
	}, nil
}

// openThrough is a client on a new journal sending through rt, at
// default settings but for opts.
func (s *paidOrderServer) openThrough(t *testing.T, rt http.RoundTripper, clock idem.Clock, opts ...idem.Option) *idem.Client {
	t.Helper()
	store, err := journal.Open(filepath.Join(t.TempDir(), "idem.journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	c, err := idem.New(store, append([]idem.Option{idem.WithHTTPClient(&http.Client{Transport: rt}), idem.WithClock(clock)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestOrderPaidNotFoundPastTheKeyWindowIsNotFailed: k's first attempt
// is refused "Order already paid" (paidOrderServer, orderFirst: the
// order is checked before the key) because a copy of k a mesh sent
// first paid it under k, its answer lost. The result endpoint, asked by
// the key, would name that payment, but its host is down (a gateway's
// 502) for two days, past the server's 24 h key window, and the server
// forgets k with the payment stored under it (Stripe: "We generate a
// new request if a key is reused after the original is pruned", keys
// being pruned once at least 24 hours old,
// https://docs.stripe.com/idempotency; Checkout.com: "By default, keys
// expire after 24 hours",
// https://www.checkout.com/docs/payments/manage-payments/idempotency;
// that the lookup by key forgets the payment with it is modelled). Once
// the host is back its "not found" says nothing of k: the key's payment,
// if any, is forgotten. Resume, and the caller's Do, took it for
// "another request paid the order" and failed k (ErrFailed), the caller
// then paying again under a new key: a second charge. Past the key
// window it stays unknown, ReviewKeyExpired (ErrKeyExpired), as any
// query past the window that does not settle; k sent once, one query in
// Resume and one in Do.
func TestOrderPaidNotFoundPastTheKeyWindowIsNotFailed(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := newPaidOrderServer(t, status)
			s.orderFirst = true
			s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
			gw := &resultHostDown{base: s.srv.Client().Transport}
			gw.down.Store(true)
			clock := idemtest.NewClock(epoch)
			c := s.openThrough(t, gw, clock)

			res, err := c.Submit(t.Context(), s.pay("k", true))
			requireOrderPaidUnknown(t, res, err)
			s.requireSent(t, 1, map[string]int{"k": 1})

			s.mu.Lock()
			delete(s.stored, "k") // two days on: the server has forgotten k
			s.mu.Unlock()
			gw.down.Store(false)
			op := resumeK(t, c, clock, 48*time.Hour)
			require.Equal(t, idem.StateUnknown, op.State, "Resume: the endpoint's not found past the key window")
			require.Equal(t, idem.ReviewKeyExpired, op.Review)
			s.requireQueries(t, 1)
			s.requireDoKeyExpired(t, c, clock, op)
		})
	}
}

// requireDoKeyExpired asserts that the caller's Do of op, flagged
// ReviewKeyExpired after one query, once the lag is past, leaves it
// unknown, ReviewKeyExpired (ErrKeyExpired): k sent once, one more query.
func (s *paidOrderServer) requireDoKeyExpired(t *testing.T, c *idem.Client, clock *idemtest.Clock, op *idem.Operation) {
	t.Helper()
	clock.Advance(idem.DefaultResultLag)
	res, err := c.Do(t.Context(), op)
	requireOutcome(t, res, err, idem.StateUnknown, []error{idem.ErrUnknownOutcome, idem.ErrKeyExpired}, "", idem.ReviewKeyExpired)
	s.requireSent(t, 1, map[string]int{"k": 1})
	s.requireQueries(t, 2)
}
