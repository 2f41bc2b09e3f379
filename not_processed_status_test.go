package idem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

// notProcessed is an answer whose status says the request was not
// processed, from whatever answered it: a front (a CDN, a load balancer,
// nginx) or the origin's own server before any handler ran.
type notProcessed struct {
	name   string
	status int
	header http.Header
	body   string
}

// notProcessedAnswers are the statuses whose HTTP meaning is that nothing
// ran, as real servers and fronts send them.
var notProcessedAnswers = []notProcessed{
	// RFC 9110 15.5.20: the server is not configured for the request's
	// authority on this connection, and the client MAY retry it on
	// another, whatever its method. Sent by nginx when a request's Host
	// differs from its connection's SNI, by gateways (Aliyun MSE's
	// http2-misdirect plugin, frp's https2http) and by a CDN a connection
	// was coalesced to
	// (https://help.aliyun.com/zh/mse/user-guide/http2-misdirect-plug-ins).
	{name: "421 nginx", status: http.StatusMisdirectedRequest, header: http.Header{"Server": {"nginx"}},
		body: `<html><head><title>421 Misdirected Request</title></head><body><center><h1>421 Misdirected Request</h1></center><hr><center>nginx</center></body></html>`},
	{name: "421 Cloudflare", status: http.StatusMisdirectedRequest, header: http.Header{"Server": {"cloudflare"}},
		body: `<html><head><title>421 Misdirected Request</title></head><body><center><h1>421 Misdirected Request</h1></center><hr><center>cloudflare</center></body></html>`},
	// RFC 8470 5.2: the server will not risk processing a request that
	// may be replayed (TLS early data, or Early-Data: 1 from a front).
	{name: "425 Too Early", status: http.StatusTooEarly, header: http.Header{"Content-Type": {"text/plain"}}, body: `Too Early`},
	// nginx's client_max_body_size: refused before the body is read.
	{name: "413 nginx client_max_body_size", status: http.StatusRequestEntityTooLarge, header: http.Header{"Server": {"nginx"}},
		body: `<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>`},
	{name: "414 nginx", status: http.StatusRequestURITooLong, header: http.Header{"Server": {"nginx"}},
		body: `<html><head><title>414 Request-URI Too Large</title></head><body><center><h1>414 Request-URI Too Large</h1></center></body></html>`},
	{name: "431 Request Header Fields Too Large", status: http.StatusRequestHeaderFieldsTooLarge, body: `431 Request Header Fields Too Large`},
	// RFC 9110 15.5.18: an expectation the server cannot meet; the
	// request was not processed.
	{name: "417 Expectation Failed", status: http.StatusExpectationFailed, body: `417 Expectation Failed`},
}

// A status saying nothing ran, to a first attempt: the operation fails at
// once with the status in its reason, is never resent, and nothing was
// made. A 421 and a 425 invite a resend (on another connection, after the
// handshake), which net/http's pool would send on the same connection
// that got the 421; failing lets the caller send again under a new key,
// which cannot charge twice since nothing ran.
func TestStatusNotProcessedToAFirstAttemptFails(t *testing.T) {
	for _, tc := range notProcessedAnswers {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
				if r.Method == http.MethodGet {
					return false
				}
				page(w, tc.status, tc.header, tc.body)
				return true
			})
			res, err := f.client(t).Submit(t.Context(), f.req("k"))
			require.ErrorIs(t, err, idem.ErrFailed)
			require.Equal(t, idem.StateFailed, res.State)
			require.Contains(t, res.Reason, http.StatusText(tc.status))
			require.Equal(t, 1, f.posts, "a refusal before anything ran is not resent")
			require.Zero(t, f.gets)
			require.Zero(t, srv.Stats().Requests)
		})
	}
}

// The same statuses to resends after a first attempt that reached the
// server and whose answer was lost, with no result endpoint: they say
// only that the resend was not processed, never that the first did not
// run, so the operation is never failed; resending cannot get past them
// and after three it is flagged for a person. The one order made stays
// the only one, and every send carries the same key.
func TestStatusNotProcessedAfterALostAnswerIsNeverFailed(t *testing.T) {
	for _, tc := range notProcessedAnswers {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			f := newFront(t, srv, func(w http.ResponseWriter, r *http.Request, n int, forward func() *httptest.ResponseRecorder) bool {
				if n == 1 {
					forward()
					dropConnection(w)
					return true
				}
				page(w, tc.status, tc.header, tc.body)
				return true
			})
			f.requireRefusedResendsFlagged(t)
			for i, r := range srv.Requests() {
				require.Equalf(t, "k", r.Key, "request %d", i+1)
			}
		})
	}
}
