package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// cutQueries is spotExchange (Binance's spot order API) behind a hop
// that cuts its answers to result queries mid-body: the exchange's
// whole answer is the order, 200 OK, its Content-Length the whole
// order's, and the connection resets after its first bytes (a load
// balancer's idle timeout, a proxy restarted, a flaky network: modelled),
// before the clientOrderId. net/http reports the body's read as
// io.ErrUnexpectedEOF (golang/go#52727: "a mismatched Content-Length
// header on the HTTP response" provokes it); servers do send such
// answers (valyala/fasthttp#913: a site's Content-Length with no body
// after it, curl's "transfer closed with … bytes remaining to read").
type cutQueries struct {
	x    *spotExchange
	mu   sync.Mutex
	cuts int // the result queries still to be cut
}

func (s *cutQueries) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	cut := r.Method == http.MethodGet && s.cuts > 0
	if cut {
		s.cuts--
	}
	s.mu.Unlock()
	if !cut {
		s.x.serve(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.x.serve(rec, r)
	body := rec.Body.Bytes()
	for name, v := range rec.Header() {
		w.Header()[name] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body[:min(len(body), 32)])
	http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

// An answer to a result query cut in transit was read as the answer
// whole: a 200 whose (cut) body holds no error and does not name the key,
// which is a search that found nothing. With the key in the body, once
// DefaultResultLag had passed, Resume resent the client order id: the
// MARKET order had filled, the id was free, and the exchange placed a
// second one (two orders for one Submit, the operation settled with the
// second). A cut answer says nothing of the order, as a failed query
// does: it is asked again, nothing is resent, and the first whole answer
// settles the operation with the order placed.
func TestCutResultQueryAnswerDoesNotResendAClientOrderID(t *testing.T) {
	x := &spotExchange{}
	s := &cutQueries{x: x, cuts: 2 * idem.DefaultMaxAttempts}
	c, clock, base := startSpot(t, s.serve)

	res, err := c.Submit(t.Context(), marketBuy(base))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	x.requireOneOrder(t, 1)

	// Past the lag, the hop still cutting: asked, never resent.
	clock.Advance(idem.DefaultResultLag)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	x.requireOneOrder(t, 1)
	require.Equal(t, idem.Summary{Visited: 1, Unknown: 1}, sum)

	// The hop mended: the whole answer settles it with the first order.
	s.mu.Lock()
	s.cuts = 0
	s.mu.Unlock()
	requireResumeSettles(t, c, "1")
	x.requireOneOrder(t, 1)
}
