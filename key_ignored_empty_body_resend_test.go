package idem_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// A capture, a confirm or a void often has no body: "The payload sent in
// this capture request is completely optional. If you don't send a
// payload with the capture request, the full amount that was authorized
// will be sent for capture" (Primer, POST /payments/{id}/capture,
// https://primer.io/docs/api/api-reference/payments-api/capture-payment).
// net/http builds such a request with http.NoBody, which it sends again
// on its own without rewinding it (net/http's rewindBody returns a NoBody
// request as it is, never calling GetBody): on HTTP/1 when a reused
// connection dies after the request was written and the request has an
// Idempotency-Key or X-Idempotency-Key header (persistConn.
// shouldRetryRequest, Request.isReplayable), over HTTP/2 after a
// PROTOCOL_ERROR reset (http2shouldRetryRequest: "If the Body is nil (or
// http.NoBody), it's safe to reuse this request and its Body"). To an
// endpoint that ignores the key (Solidgate: "Idempotency support varies
// by endpoint. Send the request with an Idempotency-Key header and check
// the Idempotency-Status value. A value of ignored means the endpoint
// does not", https://api-docs.solidgate.com/api/v2/idempotent-requests)
// that copy is a second capture, and idem, which guards only a body it is
// asked to rewind, journaled one attempt. The captures here are modelled:
// an endpoint of Primer's shape answering as Solidgate's ignoring ones
// do, each request charging afresh (pay_n).

// emptyCaptureURL is the capture of payment pay_1; k0 captures part of it
// first, with an amount, k the rest, with no body.
const emptyCaptureURL = "/api/v1/payments/pay_1/capture"

// The endpoint is known to ignore the key (k0's 201 said so). k's
// capture goes out on the connection k0's left, is charged (pay_2), and
// the server closes the connection without answering. Before: net/http
// wrote it again on a fresh connection, charged again (pay_3), and idem
// journaled one attempt. Now it goes out once and the lost answer is
// idem's: with no status endpoint, flagged ReviewKeyIgnored, not resent;
// with one, settled by it. (To an endpoint heard from, net/http's resend
// is let be: TestHeardEndpointKeepsHTTPResend.)
func TestKeyIgnoredEndpointEmptyBodyNotResent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  bool
		state   idem.State
		kinds   []error
		id      string
		review  string
		queries int
	}{
		{"no status endpoint: flagged", false, idem.StateUnknown, []error{idem.ErrNeedsReview}, "", idem.ReviewKeyIgnored, 0},
		{"the status endpoint settles the one charge", true, idem.StateSucceeded, nil, "pay_2", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newKeyIgnoringCharges(t, secondAnswerLost)
			s.answerFrom(1, orderStatus("pay_2", "settled"))
			store, c := openOn(t, filepath.Join(t.TempDir(), "idem.journal"), s.srv.Client().Transport, idemtest.NewClock(epoch))
			url := s.srv.URL + emptyCaptureURL
			res, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: url, Body: []byte(`{"amount":40}`)})
			require.NoError(t, err)
			require.Equal(t, "pay_1", res.ResourceID)

			req := idem.Request{Key: "k", URL: url}
			if tc.status {
				req.ResultURL = s.srv.URL + "/api/v1/orders/o-1"
			}
			res, err = c.Submit(t.Context(), req)
			requireOutcome(t, res, err, tc.state, tc.kinds, tc.id, tc.review)
			s.requireSeen(t, []string{"k0", "k"}, tc.queries)
			requireSentOnce(t, store, "k", 1+tc.queries, false)
		})
	}
}

// The same capture on first contact: nothing said yet whether the
// endpoint reads the key, the connection left by a refund to another
// endpoint of the host. Before: net/http's copy charged again (pay_3),
// its answer lost too, and the status endpoint, naming the order's last
// payment, settled pay_3 unflagged: two charges, nobody told. Now the
// capture goes out once: the status endpoint settles the one charge, or,
// without one, idem's own resend under the same key charges again and is
// flagged ReviewMaybeTwice.
func TestKeyIgnoredEndpointEmptyBodyNotResentOnFirstContact(t *testing.T) {
	t.Run("the status endpoint settles the one charge", func(t *testing.T) {
		s := lostChargesAfter(t, refunded)
		store, c := openOn(t, filepath.Join(t.TempDir(), "idem.journal"), s.srv.Client().Transport, idemtest.NewClock(epoch))
		_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
		require.NoError(t, err)
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + emptyCaptureURL, ResultURL: s.srv.URL + "/api/v1/orders/o-1"})
		requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_2", "")
		s.requireSeen(t, []string{"k0", "k"}, 1)
		requireSentOnce(t, store, "k", 2, false)
	})
	t.Run("no status endpoint: the second charge flagged", func(t *testing.T) {
		s := newKeyIgnoringCharges(t, func(n int, w http.ResponseWriter) {
			switch n {
			case 1:
				refunded(w)
			case 2:
				dropConnection(w) // pay_2 charged, its answer lost
			default:
				ignoredCreated(n, w)
			}
		})
		store, c := openOn(t, filepath.Join(t.TempDir(), "idem.journal"), s.srv.Client().Transport, idemtest.NewClock(epoch))
		_, err := c.Submit(t.Context(), idem.Request{Key: "k0", URL: s.srv.URL + "/api/v1/refund", Body: []byte(`{"amount":1}`)})
		require.NoError(t, err)
		res, err := c.Submit(t.Context(), idem.Request{Key: "k", URL: s.srv.URL + emptyCaptureURL})
		requireOutcome(t, res, err, idem.StateSucceeded, nil, "pay_3", idem.ReviewMaybeTwice)
		s.requireSeen(t, []string{"k0", "k", "k"}, 0)
		requireSentOnce(t, store, "k", 2, true)
	})
}

// requireSentOnce fails unless key is journaled with attempts attempts,
// none of them sent twice by net/http, and idem's own sends the only
// copies that may have executed: twice only if it resent.
func requireSentOnce(t *testing.T, store *journal.Store, key string, attempts int, resent bool) {
	t.Helper()
	rec, err := store.Get(t.Context(), idem.DefaultScope, key)
	require.NoError(t, err)
	require.Len(t, rec.Attempts, attempts, "journal: attempts")
	for _, a := range rec.Attempts {
		require.False(t, a.Resent, "journal: net/http sent none twice")
	}
	require.Equal(t, resent, journal.SentTwice(rec), "journal: idem's sends the only copies")
}

// Over HTTP/2, on first contact, the capture's stream is reset
// PROTOCOL_ERROR once it was charged (modelled: a front that resets a
// stream it forwarded; RFC 9113 8.7 says only REFUSED_STREAM means "not
// processed"). net/http's HTTP/2 transport sent the empty request again
// at once: with a status endpoint, the copy charged again and its answer
// settled the capture as one attempt; without one, a 201 to the copy
// settled it unflagged. Now the copy is never written: the status
// endpoint's query is the second stream and settles the one charge, or
// idem's own resend is, flagged ReviewMaybeTwice.
func TestKeyIgnoredEndpointHTTP2EmptyBodyNotResent(t *testing.T) {
	reset := h2Answer{protocolError: true}
	status := h2Answer{status: "200", header: [][2]string{{"content-type", "application/json"}},
		body: `{"id":"pay_1","order_id":"o-1","status":"settled"}`}
	ignored := h2Answer{status: "201", header: [][2]string{{"content-type", "application/json"}, {"idempotency-status", "ignored"}},
		body: `{"id":"pay_2","status":"settled"}`}
	for _, tc := range []struct {
		name     string
		status   bool
		answers  []h2Answer
		id       string
		review   string
		carried  []bool
		attempts []journal.AttemptKind
	}{
		{"the status endpoint settles the one charge", true, []h2Answer{reset, status}, "pay_1", "",
			[]bool{true, false}, []journal.AttemptKind{journal.AttemptSubmit, journal.AttemptQuery}},
		{"no status endpoint: the second charge flagged", false, []h2Answer{reset, ignored}, "pay_2", idem.ReviewMaybeTwice,
			[]bool{true, true}, []journal.AttemptKind{journal.AttemptSubmit, journal.AttemptSubmit}},
	} {
		for _, srv := range rawH2Servers {
			t.Run(srv.name+"/"+tc.name, func(t *testing.T) {
				s, url, hc := srv.start(t, tc.answers...)
				c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
				req := idem.Request{Key: "k1", URL: url + emptyCaptureURL}
				if tc.status {
					req.ResultURL = url + "/api/v1/orders/o-1"
				}
				res, err := c.Submit(t.Context(), req)
				requireOutcome(t, res, err, idem.StateSucceeded, nil, tc.id, tc.review)
				require.Equal(t, []string{"", ""}, s.streams(), "streams: the capture, then idem's own")
				require.Equal(t, tc.carried, s.carried("k1"), "k1 on each capture (a query carries none)")

				rec, err := c.Record(t.Context(), idem.DefaultScope, "k1")
				require.NoError(t, err)
				kinds := make([]journal.AttemptKind, len(rec.Attempts))
				for i, a := range rec.Attempts {
					kinds[i] = a.Kind
					require.False(t, a.Resent, "journal: net/http sent none twice")
				}
				require.Equal(t, tc.attempts, kinds, "journal: the capture, then idem's query or resend")
				require.Contains(t, rec.Attempts[0].Err, "not resent", "journal: the copy stopped, not the caller's cancel")
			})
		}
	}
}

// rawRequests is a listener that keeps the bytes each connection reads:
// the requests as they came on the wire.
type rawRequests struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *rawRequests) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c, l: l}, nil
}

func (l *rawRequests) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type rawConn struct {
	net.Conn
	l *rawRequests
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// An empty capture to an endpoint not heard from goes out as before: on
// HTTP/1 with Content-Length: 0, no chunked framing and no body; over
// HTTP/2 with content-length: 0 and END_STREAM on its HEADERS, no DATA
// frame. HTTP/1 sends the key's field name in lower case there, as
// HTTP/2 always does (RFC 9113 8.2.2), the value the same: field names
// are case-insensitive (RFC 9110 5.1). To an endpoint heard from the name
// stays as the Client was given it.
func TestEmptyBodyOnTheWire(t *testing.T) {
	t.Run("HTTP/1", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprint(w, `{"id":"pay_1","status":"settled"}`)
		}))
		raw := &rawRequests{Listener: srv.Listener}
		srv.Listener = raw
		srv.Start()
		t.Cleanup(srv.Close)
		c := journaledClient(t, idem.WithHTTPClient(srv.Client()), idem.WithClock(idemtest.NewClock(epoch)))
		for _, key := range []string{"k1", "k2"} { // k1 unheard, k2 heard
			_, err := c.Submit(t.Context(), idem.Request{Key: key, URL: srv.URL + emptyCaptureURL})
			require.NoError(t, err)
		}
		reqs := strings.SplitAfter(raw.String(), "\r\n\r\n")
		require.Len(t, reqs, 3, "two requests, each ending at its header block")
		require.Empty(t, reqs[2], "no body after either")
		for i, name := range []string{"idempotency-key: k1", "Idempotency-Key: k2"} {
			require.True(t, strings.HasPrefix(reqs[i], "POST "+emptyCaptureURL+" HTTP/1.1\r\n"), reqs[i])
			require.Contains(t, reqs[i], "\r\nContent-Length: 0\r\n")
			require.NotContains(t, strings.ToLower(reqs[i]), "transfer-encoding")
			require.Contains(t, reqs[i], "\r\n"+name+"\r\n")
			require.Equal(t, 1, strings.Count(strings.ToLower(reqs[i]), "idempotency-key:"), "the key once")
		}
	})
	for _, srv := range rawH2Servers {
		t.Run("HTTP/2 "+srv.name, func(t *testing.T) {
			s, url, hc := srv.start(t, h2Answer{status: "201", header: [][2]string{{"content-type", "application/json"}},
				body: `{"id":"pay_1","status":"settled"}`})
			c := journaledClient(t, idem.WithHTTPClient(hc), idem.WithClock(idemtest.NewClock(epoch)))
			_, err := c.Submit(t.Context(), idem.Request{Key: "k1", URL: url + emptyCaptureURL})
			require.NoError(t, err)
			require.Equal(t, []string{""}, s.streams())
			require.Equal(t, []bool{true}, s.endedOnHeaders(), "END_STREAM on the HEADERS frame")
			require.Equal(t, []bool{true}, s.carried("k1"))
			// content-length: 0, a literal of the static table's name 28,
			// indexed or not (RFC 7541 6.2.1, 6.2.2, A), its value's
			// octet as it is (5.2: its Huffman code is no shorter).
			s.mu.Lock()
			block := s.blocks[0]
			s.mu.Unlock()
			require.True(t, bytes.Contains(block, []byte{0x40 | 28, 0x01, '0'}) || bytes.Contains(block, []byte{0x0f, 28 - 15, 0x01, '0'}),
				"content-length: 0 in % x", block)
		})
	}
}
