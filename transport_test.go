package idem_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
)

// step scripts one round trip of scriptTransport.
type step struct {
	forward bool  // send the request to the real server first
	status  int   // then answer with this status instead (0, with no err: the server's own answer)
	err     error // or fail the round trip with this error
	header  http.Header
	body    string // the answer's body; default a JSON error
}

// scriptTransport plays a script of answers for submits (POST), then behaves
// like base. It models proxies and networks that the fake server cannot:
// 502 from a gateway after the server committed, a refused dial, and so on.
type scriptTransport struct {
	base http.RoundTripper

	mu     sync.Mutex
	script []step
	posts  int
}

func (s *scriptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return s.base.RoundTrip(req)
	}
	s.mu.Lock()
	s.posts++
	var st step
	scripted := len(s.script) > 0
	if scripted {
		st, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if !scripted {
		return s.base.RoundTrip(req)
	}
	if st.forward {
		resp, err := s.base.RoundTrip(req)
		if err != nil || (st.status == 0 && st.err == nil) {
			return resp, err // the server's own answer
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	} else if req.Body != nil {
		_ = req.Body.Close()
	}
	if st.err != nil {
		// Play net/http's part: it reports taking the request before it
		// dials, which is how idem knows a failed dial sent nothing.
		if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.GetConn != nil && !st.forward {
			tr.GetConn(req.URL.Host)
		}
		return nil, st.err
	}
	h := st.header
	if h == nil {
		h = http.Header{}
	}
	body := []byte(`{"error":"scripted ` + strconv.Itoa(st.status) + `"}`)
	if st.body != "" {
		body = []byte(st.body)
	}
	return &http.Response{
		StatusCode: st.status, Status: http.StatusText(st.status), Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// dialRefused is what net/http returns when nothing listens: never sent.
var dialRefused = &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused", Addr: "127.0.0.1:1"}}

// rtFunc is a RoundTripper made of a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
