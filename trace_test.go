package idem_test

// Whether an attempt may have reached the server is read from net/http's
// trace events: a request handed to a connection may be on the wire, a dial
// that failed before any connection sent nothing, and a transport that
// reports no events gets no benefit of the doubt. These tests check both
// sides: a wrong "never sent" lets a later refusal fail an order the server
// performed; a wrong "maybe sent" makes every refused dial ambiguous.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func scriptedResponse(req *http.Request, status int) *http.Response {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	body := `{"error":"scripted"}`
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// forwardUntraced sends req to base in a context without idem's trace, as a
// transport that reports no httptrace events (HTTP/3, a mesh SDK, a mock)
// would: the server gets it and performs it; idem hears nothing.
func forwardUntraced(base http.RoundTripper, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	_ = req.Body.Close()
	r2 := req.Clone(context.Background())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	if resp, err := base.RoundTrip(r2); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// submitTransport plays one function per submit (POST), in order; queries
// and later submits go to base.
func submitTransport(base *http.RoundTripper, steps ...func(*http.Request) (*http.Response, error)) http.RoundTripper {
	var mu sync.Mutex
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			mu.Lock()
			var st func(*http.Request) (*http.Response, error)
			if len(steps) > 0 {
				st, steps = steps[0], steps[1:]
			}
			mu.Unlock()
			if st != nil {
				return st(req)
			}
		}
		return (*base).RoundTrip(req)
	})
}

// Outcome table: "a transport that reports no trace events gets no benefit
// of the doubt". The verdict honoured that (ambiguous), but the journal
// recorded the attempt as not written, so maybeSent forgot it: the resend's
// 401 (an expired credential at a gateway) then settled as failed an order
// the server had performed. The caller, told ErrFailed, retries under a new
// key: a second charge.
func TestUntracedTransportErrorJournaledAsMaybeSent(t *testing.T) {
	var base http.RoundTripper
	tr := submitTransport(&base,
		func(req *http.Request) (*http.Response, error) {
			forwardUntraced(base, req)
			return nil, errors.New("stream reset: response lost")
		},
		func(req *http.Request) (*http.Response, error) {
			return scriptedResponse(req, http.StatusUnauthorized), nil
		},
	)
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithHTTPClient(&http.Client{Transport: tr})))
	base = e.srv.Client().Transport

	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k"), "the order was performed once")
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State, "a performed order is journaled failed")
	require.NotEqual(t, idem.StateFailed, e.record("k").State)
}

// "Not written" must mean that no connection ever had the request. net/http
// hands the request to a connection (GotConn) and writes it on another
// goroutine; when the attempt's context ends, roundTrip can return before
// WroteRequest fires although the bytes are on the wire (and transport
// wrappers that time out do the same). Counting that as "never sent" let a
// later 4xx fail a performed order.
func TestErrorAfterGotConnIsMaybeSent(t *testing.T) {
	var base http.RoundTripper
	tr := submitTransport(&base,
		func(req *http.Request) (*http.Response, error) {
			if tr := httptrace.ContextClientTrace(req.Context()); tr != nil {
				if tr.GetConn != nil {
					tr.GetConn(req.URL.Host)
				}
				if tr.GotConn != nil {
					tr.GotConn(httptrace.GotConnInfo{})
				}
			}
			forwardUntraced(base, req)
			return nil, context.DeadlineExceeded
		},
		func(req *http.Request) (*http.Response, error) {
			return scriptedResponse(req, http.StatusForbidden), nil
		},
	)
	e := newEnv(t, noResultEndpoint(), clientOpts(idem.WithHTTPClient(&http.Client{Transport: tr})))
	base = e.srv.Client().Transport

	res, err := e.client.Submit(e.ctx, e.req("k", `{"amount":42}`))
	require.Equal(t, 1, e.srv.Effects(scope, "k"))
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.NotEqual(t, idem.StateFailed, res.State)
}

// A dial that fails before any connection is had is still "never sent"
// (counting an error after GotConn as maybe sent must not make every
// refused dial ambiguous).
func TestRefusedDialStillNotSent(t *testing.T) {
	e := newEnv(t, script(step{err: dialRefused}))
	res, err := e.client.Submit(e.ctx, e.req("k", `{}`))
	require.NoError(t, err)
	require.Equal(t, idem.StateSucceeded, res.State)
	require.Zero(t, e.queries("k"), "a refused dial was treated as maybe sent")
	rec := e.record("k")
	require.False(t, rec.Attempts[0].Wrote)
}
