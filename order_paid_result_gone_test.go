package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

// resultKeyGone answers result queries 410 Gone while gone, as a server
// does for a key it held and has expired (expiringServer's endpoint);
// the rest passes.
type resultKeyGone struct {
	base http.RoundTripper
	gone atomic.Bool
}

func (g *resultKeyGone) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := g.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !g.gone.Load() {
		return res, err
	}
	return answerInstead(res, http.StatusGone, http.Header{"Content-Type": {"application/json"}},
		`{"error":{"code":"IDEMPOTENCY_KEY_EXPIRED","message":"Idempotency key expired"}}`), nil
}

// answerInstead is res, its body read and closed, answering status,
// header and body instead: what the server sent was lost on the way.
func answerInstead(res *http.Response, status int, header http.Header, body string) *http.Response {
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	res.StatusCode, res.Status, res.Header = status, fmt.Sprint(status, " ", http.StatusText(status)), header
	res.Body, res.ContentLength = io.NopCloser(strings.NewReader(body)), -1
	return res
}

// TestOrderPaidNotFoundAfterTheKeyGoneIsNotFailed: k's first attempt is
// refused "Order already paid" by a server that keeps the key 5 minutes
// (Helcim's Payment API: idempotency keys "are cleared after 5
// minutes", https://devdocs.helcim.com/docs/idempotency-keys,
// idem.KeyRetentionHelcim, which the caller did not name: default
// settings; that it answers so is modelled) and checks the order first: a copy of k a mesh sent first
// paid it, its answer lost (paidOrderServer, orderFirst). The result
// host is down (a gateway's 502) at first; six minutes on the server
// has pruned k with the payment under it, and its result endpoint says
// so, 410 Gone (modelled on expiringServer's), flagging k
// ReviewKeyExpired. Asked again three minutes later, inside the default
// window, the endpoint answers 404 for the key it no longer holds, and
// that "not found" failed k (ErrFailed): the caller would pay again. The
// server's word that the key is gone stands, as for resends (flagBlock):
// k stays unknown, ReviewKeyExpired; sent once, one charge, two queries
// reaching the server.
func TestOrderPaidNotFoundAfterTheKeyGoneIsNotFailed(t *testing.T) {
	s := newPaidOrderServer(t, http.StatusConflict)
	s.orderFirst = true
	s.charges, s.stored["k"] = 1, `{"id":"pay_1","status":"succeeded"}` // the mesh's copy of k
	gone := &resultKeyGone{base: s.srv.Client().Transport}
	gw := &resultHostDown{base: gone}
	gw.down.Store(true)
	clock := idemtest.NewClock(epoch)
	c := s.openThrough(t, gw, clock)

	res, err := c.Submit(t.Context(), s.pay("k", true))
	requireOrderPaidUnknown(t, res, err)

	s.mu.Lock()
	delete(s.stored, "k") // five minutes on: pruned
	s.mu.Unlock()
	gw.down.Store(false)
	gone.gone.Store(true)
	op := resumeK(t, c, clock, 6*time.Minute)
	require.Equal(t, idem.StateUnknown, op.State)
	require.Equal(t, idem.ReviewKeyExpired, op.Review, "the endpoint's 410")

	gone.gone.Store(false)
	op = resumeK(t, c, clock, 3*time.Minute)
	require.Equal(t, idem.StateUnknown, op.State, "the endpoint's not found after its 410")
	require.Equal(t, idem.ReviewKeyExpired, op.Review)
	s.requireSent(t, 1, map[string]int{"k": 1})
	s.requireQueries(t, 2)
}
