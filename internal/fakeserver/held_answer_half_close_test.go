package fakeserver_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fakeserver"
)

// TestHeldAnswerToAClientThatHalfClosedIsNoAnswer: a client that shuts
// its sending side after the request (as some HTTP/1.0-style clients and
// proxies do) still reads; net/http ends the request's context at that
// EOF all the same. A held answer then sent nothing and returned, and
// net/http answered for it: 200 with an empty body, for a request that
// was declined (402). What the client reads must be the answer or no
// answer, never a success the server did not give.
func TestHeldAnswerToAClientThatHalfClosedIsNoAnswer(t *testing.T) {
	h := newHarness(t, fakeserver.Config{})
	require.NoError(t, h.srv.Inject(fakeserver.Fault{Kind: fakeserver.StillRunningDecline, Key: "k", Delay: time.Hour}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.ts.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\nContent-Length: 2\r\n\r\n{}")
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())

	got, _ := io.ReadAll(conn) // EOF or a reset: either is no answer
	require.NotContains(t, string(got), "HTTP/1.1 200", "an answer the server never gave")
	require.Empty(t, string(got), "no answer: the held one was not sent")
	require.Zero(t, h.srv.Effects("", "k"), "declined: no order")
	require.Zero(t, h.srv.Requests()[0].Status)
}
