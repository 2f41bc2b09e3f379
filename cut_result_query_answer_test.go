package idem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
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
//
// The hop can end the answer short in two other ways, by how:
//
//   - endStream: over HTTP/2, the stream ends cleanly (END_STREAM) short
//     of the Content-Length, as a Go front copying an upstream's body
//     that ignores the copy's error answers. RFC 9113 8.1.1 calls it
//     malformed; net/http's HTTP/2 client reads it as io.ErrUnexpectedEOF
//     (its body's bytesRemain; golang/go#46071's body-less case,
//     missingBody). The first submit's stream is reset once the exchange
//     has placed the order (RST_STREAM): its answer is lost.
//   - closeDelimited: over HTTP/1.1 with neither Content-Length nor
//     chunking, the body ends where the connection closes (RFC 9112 6.3
//     item 8), so a close after the first bytes (a FIN, not a reset) is
//     the end of the answer to every reader: no read error at all. So
//     answer HTTP/1.0 servers, and a front whose upstream spoke so (nginx
//     proxies with HTTP/1.0 unless told: proxy_http_version) passes the
//     cut body on as whole.
type cutQueries struct {
	x   *spotExchange
	how cutHow

	mu      sync.Mutex
	cuts    int // the result queries still to be cut
	submits int
}

// cutHow is how cutQueries ends an answer short.
type cutHow int

const (
	cutReset cutHow = iota
	cutEndStream
	cutCloseDelimited
)

func (s *cutQueries) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	cut := r.Method == http.MethodGet && s.cuts > 0
	if cut {
		s.cuts--
	}
	if r.Method == http.MethodPost {
		s.submits++
	}
	lost := s.how == cutEndStream && r.Method == http.MethodPost && s.submits == 1
	s.mu.Unlock()
	if lost {
		// spotExchange drops an HTTP/1 connection, which HTTP/2 cannot
		// hijack: the stream is reset instead, the order placed.
		s.x.serve(httptest.NewRecorder(), r)
		panic(http.ErrAbortHandler)
	}
	if !cut {
		s.x.serve(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.x.serve(rec, r)
	body := rec.Body.Bytes()
	part := body[:min(len(body), 32)]
	if s.how == cutCloseDelimited {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nConnection: close\r\n\r\n%s",
			rec.Code, http.StatusText(rec.Code), rec.Header().Get("Content-Type"), part)
		_ = buf.Flush()
		return
	}
	for name, v := range rec.Header() {
		w.Header()[name] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(part)
	if s.how == cutEndStream {
		return
	}
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
	s := &cutQueries{x: &spotExchange{}, cuts: 2 * idem.DefaultMaxAttempts}
	c, clock, base := startSpot(t, s.serve)
	requireCutQueriesResendNothing(t, s, c, clock, base)
}

// requireCutQueriesResendNothing submits the MARKET order through s's
// hop, which loses its answer and cuts every result query's: unknown,
// one order, and past DefaultResultLag still so; once the hop is mended,
// the first whole answer settles it with the order placed.
func requireCutQueriesResendNothing(t *testing.T, s *cutQueries, c *idem.Client, clock *idemtest.Clock, base string) {
	t.Helper()
	res, err := c.Submit(t.Context(), marketBuy(base))
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StateUnknown, res.State)
	s.x.requireOneOrder(t, 1)

	// Past the lag, the hop still cutting: asked, never resent.
	clock.Advance(idem.DefaultResultLag)
	sum, err := c.Resume(t.Context())
	require.NoError(t, err)
	s.x.requireOneOrder(t, 1)
	require.Equal(t, idem.Summary{Visited: 1, Unknown: 1}, sum)

	// The hop mended: the whole answer settles it with the first order.
	s.mu.Lock()
	s.cuts = 0
	s.mu.Unlock()
	requireResumeSettles(t, c, "1")
	s.x.requireOneOrder(t, 1)
}

// The same cut over HTTP/2, the stream ended cleanly short of its
// Content-Length: net/http reports it as it reports HTTP/1's, and the
// answer is a failed query too.
func TestHTTP2StreamEndedShortOfContentLengthDoesNotResendAClientOrderID(t *testing.T) {
	s := &cutQueries{x: &spotExchange{}, how: cutEndStream, cuts: 2 * idem.DefaultMaxAttempts}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	srv.EnableHTTP2 = true
	hc := startTrusted(t, srv)
	c, clock, base := spotClient(t, srv.URL, hc)
	requireCutQueriesResendNothing(t, s, c, clock, base)
}

// An answer delimited by the connection's close, closed after its first
// bytes, carries no read error: nothing in transit tells it from the
// whole answer. Its body began as a JSON document and is none (it does
// not parse), and was read as a 200 with no error that does not name the
// key, a search that found nothing: past DefaultResultLag Resume resent
// the client order id, and the exchange placed a second order. A body
// that begins as JSON and does not parse is cut, however it came: a
// failed query, asked again, never resent.
func TestCloseDelimitedResultQueryAnswerCutShortDoesNotResendAClientOrderID(t *testing.T) {
	s := &cutQueries{x: &spotExchange{}, how: cutCloseDelimited, cuts: 2 * idem.DefaultMaxAttempts}
	c, clock, base := startSpot(t, s.serve)
	requireCutQueriesResendNothing(t, s, c, clock, base)
}
